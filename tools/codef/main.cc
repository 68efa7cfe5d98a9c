// codef: hosts every cluster of a CODEF scenario in one process. Each cluster
// with nodes serves the emulated codeco.lms.v1.LmsService on its own loopback
// address (hub 127.0.1.1, i-th managed cluster 127.0.<i+2>.1); the link
// emulator (when built in) gives each cluster an egress relay that imposes the
// scenario's links; the control API (codeco.codef.v1.CodefService) injects
// faults. Prints one line per cluster and "codef control listening on ADDR",
// runs the scenario's fault timeline, and stops cleanly on SIGTERM or SIGINT.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "codeco/common/clock.h"
#include "codeco/common/config.h"
#include "codeco/common/logging.h"
#include "codeco/common/server.h"
#include "codef_service.h"
#include "federation.h"
#include "file_archive_store.h"
#include "lms_service.h"
#include "nlohmann/json.hpp"
#include "recorder.h"
#include "scenario.h"
#ifdef CODEF_HAVE_RELAY
#include "relay_link_control.h"
#endif

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;

ConfigSchema CodefSchema() {
  ConfigSchema schema;
  schema.Add({.path = "scenario", .required = true, .help = "scenario YAML file"});
  schema.Add(
      {.path = "state_dir",
       .help = "directory for endpoints.json and checkpoint archives (in memory when empty)"});
  schema.Add({.path = "control_listen",
              .type = ConfigType::kAddress,
              .default_value = "127.0.0.1:7100",
              .help = "host:port of the control API (loopback)"});
  schema.Add({.path = "lms_port",
              .type = ConfigType::kInt,
              .default_value = "7400",
              .help = "port of each cluster's LMS on its service IP (0 = any free port)"});
  schema.Add({.path = "tick",
              .type = ConfigType::kDuration,
              .default_value = "100ms",
              .help = "how often pod phases and the fault timeline advance"});
  schema.Add({.path = "record",
              .type = ConfigType::kBool,
              .default_value = "false",
              .help = "write the scenario's record.metrics as CSV files"});
  schema.Add(
      {.path = "output_dir", .help = "where --record writes (default: the scenario's output.dir)"});
  schema.Add({.path = "log.level",
              .type = ConfigType::kEnum,
              .default_value = "info",
              .allowed_values = {"debug", "info", "warn", "error"},
              .help = "minimum log level"});
  return schema;
}

// Usage traces are small CSV files; refuse anything bigger.
constexpr uintmax_t kMaxTraceBytes = 16 << 20;

FileReader ReaderUnder(const std::string& base_dir) {
  // Trace files come from pod annotations, i.e. from any LMS client: only
  // files under the scenario's directory may be read.
  return [base_dir](const std::string& path) -> absl::StatusOr<std::string> {
    fs::path relative(path);
    if (relative.empty() || relative.is_absolute()) {
      return absl::InvalidArgumentError("must be a path relative to the scenario's directory");
    }
    for (const fs::path& part : relative) {
      if (part == "..")
        return absl::InvalidArgumentError("must not leave the scenario's directory");
    }
    fs::path full = fs::path(base_dir) / relative;
    std::error_code ec;
    if (fs::file_size(full, ec) > kMaxTraceBytes && !ec) {
      return absl::InvalidArgumentError(absl::StrCat("larger than ", kMaxTraceBytes, " bytes"));
    }
    std::ifstream in(full);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", full.string()));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
}

int Run(int argc, char** argv) {
  BlockTerminationSignals();
  ConfigSchema schema = CodefSchema();
  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv, schema);
  if (!flags.ok()) {
    std::cerr << "codef: " << flags.status().message() << std::endl;
    return 2;
  }
  if (flags->help) {
    std::cout
        << "usage: codef --scenario FILE [--state-dir DIR] [--control-listen HOST:PORT]\n"
        << "             [--lms-port PORT] [--tick DURATION] [--record [--output-dir DIR]]\n\n"
        << schema.HelpText();
    return 0;
  }
  absl::StatusOr<Config> config = schema.LoadFile(flags->config_file, flags->overrides);
  if (!config.ok()) {
    std::cerr << "codef: invalid configuration:\n" << config.status().message() << std::endl;
    return 2;
  }
  log::SetService("codef");
  log::Level level = log::Level::kInfo;
  log::ParseLevel(config->GetString("log.level"), &level);
  log::SetLevel(level);
  const std::string scenario_file = config->GetString("scenario");
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(scenario_file);
  if (!scenario.ok()) {
    std::cerr << "codef: " << scenario_file << ":\n" << scenario.status().message() << std::endl;
    return 2;
  }
  int64_t lms_port = config->GetInt("lms_port");
  if (lms_port < 0 || lms_port > 65535) {
    std::cerr << "codef: lms_port: must be 0-65535" << std::endl;
    return 2;
  }
  auto fail = [](const absl::Status& status) {
    log::Error("start failed", {{"error", std::string(status.message())}});
    std::cerr << "codef: " << status.message() << std::endl;
    return 1;
  };

  // Address plan: the hub first, then the managed clusters in order.
  std::vector<std::pair<std::string, std::string>> clusters = {{scenario->hub.name, kHubServiceIp}};
  for (size_t i = 0; i < scenario->clusters.size(); ++i) {
    clusters.emplace_back(scenario->clusters[i].name, ManagedClusterServiceIp(i));
  }

  std::map<std::string, std::string> relays;
#ifdef CODEF_HAVE_RELAY
  LinkEmulator emulator;
  for (const auto& [name, ip] : clusters) {
    absl::StatusOr<std::string> relay = emulator.AddCluster(name, ip, ip + ":0");
    if (!relay.ok()) return fail(relay.status());
    relays[name] = *relay;
  }
  RelayLinkControl links(&emulator);
#else
  log::Warn("built without the link emulator: link conditions are recorded, not enforced");
  InMemoryLinkControl links;
#endif
  // With a state dir, checkpoint archives are real tar files the
  // checkpointer can package; without one they stay in memory.
  std::unique_ptr<CheckpointArchiveStore> archives;
  if (config->Has("state_dir")) {
    archives = std::make_unique<FileCheckpointArchiveStore>(config->GetString("state_dir"));
  } else {
    archives = std::make_unique<InMemoryCheckpointArchiveStore>();
  }
  std::string base_dir = fs::path(scenario_file).parent_path().string();
  absl::StatusOr<std::unique_ptr<Federation>> federation = Federation::Create(
      *scenario, RealClock::Default(), &links, archives.get(), ReaderUnder(base_dir));
  if (!federation.ok()) return fail(federation.status());

  std::vector<std::unique_ptr<EmulatedLmsService>> services;
  std::vector<std::unique_ptr<GrpcServer>> servers;
  nlohmann::json endpoints = {{"scenario", scenario->name}, {"clusters", nlohmann::json::array()}};
  for (const auto& [name, ip] : clusters) {
    std::string lms_address;
    if (SynchronizedCluster* lms = (*federation)->FindLms(name)) {
      services.push_back(std::make_unique<EmulatedLmsService>(lms));
      GrpcServerOptions options;
      options.service = "codef-lms";
      options.listen = absl::StrCat(ip, ":", lms_port);
      options.insecure = true;
      options.services = {services.back().get()};
      absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(options);
      if (!server.ok()) return fail(server.status());
      lms_address = (*server)->address();
      servers.push_back(std::move(*server));
    }
    std::string relay = relays.count(name) > 0 ? relays[name] : "";
    (*federation)->SetEndpoints(name, lms_address, relay);
    std::cout << "cluster " << name << " ip " << ip << " lms "
              << (lms_address.empty() ? "-" : lms_address) << " relay "
              << (relay.empty() ? "-" : relay) << std::endl;
    endpoints["clusters"].push_back(
        {{"name", name}, {"service_ip", ip}, {"lms", lms_address}, {"relay", relay}});
  }

  CodefControlService control(federation->get());
  GrpcServerOptions control_options;
  control_options.service = "codef";
  control_options.listen = config->GetString("control_listen");
  control_options.insecure = true;
  control_options.services = {&control};
  absl::StatusOr<std::unique_ptr<GrpcServer>> control_server = GrpcServer::Start(control_options);
  if (!control_server.ok()) return fail(control_server.status());
  endpoints["control"] = (*control_server)->address();
  if (config->Has("state_dir")) {
    fs::path dir = config->GetString("state_dir");
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::ofstream out(dir / "endpoints.json");
    out << endpoints.dump(2) << "\n";
    if (!out) return fail(absl::UnavailableError(absl::StrCat("cannot write ", dir.string())));
  }
  std::cout << "codef control listening on " << (*control_server)->address() << std::endl;

  // Recording: one CSV file per metric, appended every record.interval.
  std::unique_ptr<Recorder> recorder;
  std::map<std::string, std::unique_ptr<std::ofstream>> record_files;
  fs::path output_dir =
      config->Has("output_dir") ? config->GetString("output_dir") : scenario->record.output_dir;
  if (config->GetBool("record")) {
    std::error_code ec;
    fs::create_directories(output_dir, ec);
    if (ec)
      return fail(absl::UnavailableError(absl::StrCat("cannot create ", output_dir.string())));
    recorder = std::make_unique<Recorder>(scenario->record, federation->get());
    std::cout << "codef recording to " << output_dir.string() << std::endl;
  }
  absl::Time start = RealClock::Default().Now();
  absl::Time next_sample = start;
  auto sample = [&](absl::Time now) {
    for (const auto& [file, text] : recorder->Sample(now, start)) {
      auto& out = record_files[file];
      if (out == nullptr) {
        out = std::make_unique<std::ofstream>(output_dir / file, std::ios::trunc);
      }
      *out << text;
      out->flush();
    }
  };

  // The ticker moves pod phases along, plays the fault timeline and records.
  (*federation)->StartTimeline(start);
  absl::Notification stop;
  absl::Duration tick = config->GetDuration("tick");
  if (tick <= absl::ZeroDuration()) tick = absl::Milliseconds(100);
  std::thread ticker([&] {
    while (!stop.WaitForNotificationWithTimeout(tick)) {
      for (const std::string& line : (*federation)->Tick()) log::Info("fault", {{"event", line}});
      absl::Time now = RealClock::Default().Now();
      if (recorder != nullptr && now >= next_sample) {
        sample(now);
        next_sample = now + absl::Nanoseconds(scenario->record.interval_ns);
      }
    }
    if (recorder != nullptr) sample(RealClock::Default().Now());  // the final state
  });

  int signal_number = WaitForTerminationSignal();
  log::Info("stopping", {{"signal", absl::StrCat(signal_number)}});
  stop.Notify();
  ticker.join();
  (*control_server)->Shutdown(absl::Seconds(1));
  for (auto& server : servers) server->Shutdown(absl::Seconds(1));
#ifdef CODEF_HAVE_RELAY
  emulator.Shutdown();
#endif
  return 0;
}

}  // namespace
}  // namespace codeco::codef

int main(int argc, char** argv) { return codeco::codef::Run(argc, argv); }
