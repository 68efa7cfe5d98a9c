// `codecoctl get scores`: every cluster's PDLC recommendation as a table.
#include "scores.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codeco/common/proto_util.h"
#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

namespace pb = codeco::pdlc::v1;

int Fail(const std::string& message) {
  std::cerr << "codecoctl get scores: " << message << "\n";
  return 1;
}

absl::StatusOr<common::v1::PerformanceProfile> ParseProfile(const std::string& name) {
  if (name == "performance") return common::v1::PERFORMANCE_PROFILE_LATENCY;
  std::optional<common::v1::PerformanceProfile> profile = ParsePerformanceProfile(name);
  if (profile.has_value() && *profile != common::v1::PERFORMANCE_PROFILE_CUSTOM) return *profile;
  return absl::InvalidArgumentError(
      absl::StrCat("--profile: latency, greenness, resilience or cost, not \"", name, "\""));
}

// (cluster, address) of each PDLC to ask.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Targets(const Args& args) {
  if (args.Has("pdlc")) return std::vector<std::pair<std::string, std::string>>{{args.Get("pdlc"), args.Get("pdlc")}};
  auto state = LoadRunState();
  if (!state.ok()) return absl::FailedPreconditionError(absl::StrCat(state.status().message(), "; pass --pdlc ADDRESS"));
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [cluster, address] : ServiceAddresses(*state, "pdlc")) {
    if (args.Has("cluster") && cluster != args.Get("cluster")) continue;
    out.emplace_back(std::move(cluster), std::move(address));
  }
  if (out.empty()) {
    return absl::NotFoundError(args.Has("cluster") ? absl::StrCat("--cluster: no PDLC of cluster \"",
                                                                  args.Get("cluster"), "\" in this federation")
                                                   : std::string("this federation runs no PDLC"));
  }
  return out;
}

std::string Component(const pb::NodeScore& s, const std::string& name) {
  auto it = s.components().find(name);
  return it == s.components().end() ? "-" : absl::StrFormat("%.0f", it->second);
}

}  // namespace

int RunGetScores(const Args& args) {
  auto profile = ParseProfile(args.Get("profile", "latency"));
  if (!profile.ok()) return Fail(std::string(profile.status().message()));
  const std::string output = args.Get("o", "table");
  if (output != "table" && output != "json") return Fail("-o: table or json, not \"" + output + "\"");
  auto targets = Targets(args);
  if (!targets.ok()) return Fail(std::string(targets.status().message()));

  int failures = 0;
  std::vector<pb::Recommendation> recommendations;
  for (const auto& [cluster, address] : *targets) {
    auto channel = ChannelTo(address, args);
    if (!channel.ok()) return Fail(std::string(channel.status().message()));
    auto stub = pb::PdlcService::NewStub(*channel);
    pb::GetRecommendationRequest request;
    request.set_performance_profile(*profile);
    pb::GetRecommendationResponse response;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = stub->GetRecommendation(context.get(), request, &response);
    if (!status.ok()) {
      std::cerr << "codecoctl get scores: " << cluster << ": " << status.error_message() << "\n";
      ++failures;
      continue;
    }
    recommendations.push_back(response.recommendation());
  }
  if (output == "json") {
    std::cout << "[";
    for (size_t i = 0; i < recommendations.size(); ++i) {
      std::string json;
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      (void)google::protobuf::util::MessageToJsonString(recommendations[i], &json, options);
      std::cout << (i ? ",\n" : "\n") << json;
    }
    std::cout << "]\n";
    return failures ? 1 : 0;
  }
  std::cout << absl::StrFormat("%-14s %-16s %6s %9s %8s %8s %7s %7s %7s %6s\n", "CLUSTER", "NODE", "SCORE",
                               "STABILITY", "CPU_HEAD", "MEM_HEAD", "ENERGY", "CARBON", "FAILURE", "MODEL");
  for (const pb::Recommendation& r : recommendations) {
    for (const pb::NodeScore& s : r.node_scores()) {
      std::cout << absl::StrFormat("%-14s %-16s %6.1f %9.2f %8s %8s %7s %7s %7s %6s\n", r.cluster(), s.node(),
                                   s.score(), s.stability(), Component(s, "cpu_headroom"),
                                   Component(s, "memory_headroom"), Component(s, "energy"), Component(s, "carbon"),
                                   Component(s, "failure"), r.model_version() == "none" ? "-" : "lstm");
    }
    std::cout << absl::StrFormat("%-14s %-16s %6.1f %9.2f\n", r.cluster(), "(cluster)", r.cluster_score(),
                                 r.stability());
  }
  bool header = false;
  for (const pb::Recommendation& r : recommendations) {
    for (const pb::Advisory& a : r.advisories()) {
      if (!header) {
        std::cout << "\nADVISORIES\n";
        header = true;
      }
      std::cout << "  " << r.cluster() << ": " << a.message() << "\n";
    }
  }
  return failures ? 1 : 0;
}

}  // namespace codeco::ctl
