#include "run_state.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace codeco::ctl {

std::string CodecoHome() {
  if (const char* home = std::getenv("CODECO_HOME"); home != nullptr && *home != '\0') return home;
  const char* user_home = std::getenv("HOME");
  return absl::StrCat(user_home != nullptr ? user_home : "/tmp", "/.codeco");
}

std::string StateFilePath() { return CodecoHome() + "/state.json"; }

absl::Status SaveRunState(const RunState& state) {
  nlohmann::json j = {{"scenario", state.scenario},   {"run_dir", state.run_dir},
                      {"acm", state.acm},             {"swm", state.swm}, {"netma", state.netma},             {"codef_control", state.codef_control},
                      {"prometheus", state.prometheus}, {"registry", state.registry}, {"insecure", state.insecure},
                      {"ca_file", state.ca_file},     {"cert_file", state.cert_file},
                      {"key_file", state.key_file},   {"processes", nlohmann::json::array()}};
  for (const auto& p : state.processes) {
    j["processes"].push_back(
        {{"name", p.name},
         {"pid", p.pid},
         {"command", p.command},
         {"grpc", p.grpc},
         {"http", p.http},
         {"plaintext", p.plaintext},
         {"argv", p.argv}});
  }
  std::error_code ec;
  std::filesystem::create_directories(CodecoHome(), ec);
  std::string tmp = StateFilePath() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
    out << j.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, StateFilePath(), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot write ", StateFilePath()));
  return absl::OkStatus();
}

absl::StatusOr<RunState> LoadRunState() {
  std::ifstream in(StateFilePath());
  if (!in) {
    return absl::NotFoundError(absl::StrCat("no federation is up (no ", StateFilePath(),
                                            "); start one with codecoctl up --scenario FILE"));
  }
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    RunState state;
    state.scenario = j.value("scenario", "");
    state.run_dir = j.value("run_dir", "");
    state.acm = j.value("acm", "");
    state.swm = j.value("swm", "");
    state.netma = j.value("netma", "");
    state.codef_control = j.value("codef_control", "");
    state.prometheus = j.value("prometheus", "");
    state.registry = j.value("registry", "");
    state.insecure = j.value("insecure", false);
    state.ca_file = j.value("ca_file", "");
    state.cert_file = j.value("cert_file", "");
    state.key_file = j.value("key_file", "");
    for (const auto& p : j.at("processes")) {
      state.processes.push_back({p.value("name", ""), p.value("pid", 0), p.value("command", ""),
                                 p.value("grpc", ""), p.value("http", ""),
                                 p.value("plaintext", false),
                                 p.value("argv", std::vector<std::string>{})});
    }
    return state;
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(StateFilePath(), " is damaged: ", e.what()));
  }
}

void RemoveRunState() {
  std::error_code ec;
  std::filesystem::remove(StateFilePath(), ec);
}

std::vector<std::pair<std::string, std::string>> ServiceAddresses(const RunState& state,
                                                                  const std::string& service) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RunProcess& p : state.processes) {
    const size_t slash = p.name.find('/');
    if (slash == std::string::npos || p.name.substr(slash + 1) != service) continue;
    out.emplace_back(p.name.substr(0, slash), p.grpc);
  }
  return out;
}

}  // namespace codeco::ctl
