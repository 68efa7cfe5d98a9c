// codecoctl migrate APP/WORKLOAD [--to CLUSTER [--node NODE]] [--request-id ID] [--swm ADDR]
//
// Moves one workload of a placed application through the hub SWM
// (MigrateWorkload): SWM picks the target (or takes --to/--node), creates
// the new pod there, and removes the old one once the new one runs. Prints
// where it went.
//
// codecoctl migrate POD --from CLUSTER --to CLUSTER --node NODE [--as NAME]
//   [--container NAME] [--repository REPO] [--request-id ID] [--no-wait]
//   [--checkpointer ADDR]
//
// Moves a pod's container with its state: the source cluster's checkpointer
// checkpoints it, pushes the image, has the target cluster's checkpointer
// restore and verify it, then retires the source. Follows the operation with
// a progress bar (one line updated in place on a terminal, a line per change
// otherwise) and prints the time of each phase at the end.
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "cli.h"
#include "codeco/checkpointer/v1/checkpointer_service.grpc.pb.h"
#include "operation_wait.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

namespace cp = checkpointer::v1;

constexpr char kUsage[] =
    "usage: codecoctl migrate APP/WORKLOAD [--to CLUSTER [--node NODE]] [--request-id ID]\n"
    "         [--swm ADDR]\n"
    "       codecoctl migrate POD --from CLUSTER --to CLUSTER --node NODE [--as NAME]\n"
    "         [--container NAME] [--repository REPO] [--request-id ID] [--no-wait]\n"
    "         [--checkpointer ADDR]";

// `migrate APP/WORKLOAD`: the hub SWM moves the workload; prints the outcome.
int MigrateWorkload(const Args& args) {
  const std::string& name = args.positional[0];
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
      name.find('/', slash + 1) != std::string::npos) {
    std::cerr << kUsage << "\n";
    return 2;
  }
  for (const char* flag : {"as", "container", "repository", "checkpointer", "no-wait"}) {
    if (args.Has(flag)) {
      return Fail("migrate", absl::StrCat("--", flag, ": only applies to migrate POD --from"));
    }
  }
  if (args.Has("node") && !args.Has("to")) return Fail("migrate", "--node: goes with --to CLUSTER");
  auto stub = SwmStub(args);
  if (!stub.ok()) return Fail("migrate", std::string(stub.status().message()));
  swm::v1::MigrateWorkloadRequest request;
  request.set_application(name.substr(0, slash));
  request.set_workload(name.substr(slash + 1));
  request.set_target_cluster(args.Get("to"));
  request.set_target_node(args.Get("node"));
  request.set_reason(swm::v1::MIGRATION_REASON_MANUAL);
  request.set_request_id(args.Get("request-id"));
  swm::v1::MigrateWorkloadResponse response;
  auto context = ContextWithTimeout(args, absl::Minutes(5));
  grpc::Status status = (*stub)->MigrateWorkload(context.get(), request, &response);
  if (!status.ok()) return Fail("migrate", status.error_message());
  const common::v1::Operation& op = response.operation();
  swm::v1::Migration m;
  if (!op.result().UnpackTo(&m)) {
    return Fail("migrate", "operation " + op.id() + " answered without a migration");
  }
  std::cout << "migration " << m.id() << ": " << m.application() << "/" << m.workload()
            << " from " << m.source().cluster() << "/" << m.source().node() << " to "
            << m.target().cluster() << "/" << m.target().node() << " as pod "
            << m.target().pod() << " ("
            << absl::AsciiStrToLower(
                   absl::StripPrefix(swm::v1::MigrationPhase_Name(m.phase()), "MIGRATION_PHASE_"))
            << ")\n";
  if (!m.checkpoint_id().empty()) {
    std::cout << "state moved with it by the checkpointer of " << m.source().cluster()
              << " (operation " << m.checkpoint_id().substr(m.checkpoint_id().find(':') + 1)
              << ")\n";
  }
  if (!op.done()) {
    std::cout << "the workload runs at the target; " << m.error().message()
              << "\nfollow it with: codecoctl get migration " << m.id() << "\n";
  }
  return 0;
}

// The checkpointer of `cluster`: --checkpointer, else the federation's (`codecoctl up`).
absl::StatusOr<std::string> CheckpointerOf(const std::string& cluster, const Args& args) {
  if (args.Has("checkpointer")) return args.Get("checkpointer");
  auto state = LoadRunState();
  if (!state.ok()) return state.status();
  for (const RunProcess& p : state->processes) {
    if (p.name == cluster + "/checkpointer" && !p.grpc.empty()) return p.grpc;
  }
  return absl::NotFoundError(absl::StrCat("--from: the federation has no cluster \"", cluster,
                                          "\" with a checkpointer; give --checkpointer ADDR"));
}

// "[#########...........]  45%  pushing …" in at most 100 columns.
std::string ProgressLine(const common::v1::Operation& op) {
  constexpr int kWidth = 24;
  const int filled = std::clamp(op.progress_percent(), 0, 100) * kWidth / 100;
  std::string phase = op.phase();
  std::replace(phase.begin(), phase.end(), '\n', ' ');
  if (phase.size() > 64) phase = phase.substr(0, 61) + "...";
  return absl::StrCat("[", std::string(filled, '#'), std::string(kWidth - filled, '.'), "] ",
                      absl::StrFormat("%3d%%", op.progress_percent()), "  ", phase);
}

std::string Seconds(int64_t ns) { return absl::StrFormat("%.2fs", static_cast<double>(ns) / 1e9); }

// The phases of a finished migration and where the state went.
void PrintResult(const cp::Checkpoint& c) {
  const cp::PhaseTimings& t = c.timings();
  std::cout << "moved " << c.source().pod() << "/" << c.source().container() << " from "
            << c.source().cluster() << " to " << c.restored().cluster() << "/"
            << c.restored().node() << " as " << c.restored().pod() << " (" << c.driver() << ", "
            << absl::StrFormat("%.1f MB", static_cast<double>(c.state_bytes()) / 1e6)
            << " of state)\n"
            << "image " << c.image_reference() << "\n"
            << absl::StrFormat("%-11s %-8s %-8s %-8s %-8s %-8s %-8s %-8s %s\n", "phase",
                               "checkpoint", "build", "push", "pull", "restore", "verify",
                               "cutover", "total")
            << absl::StrFormat("%-11s %-10s %-8s %-8s %-8s %-8s %-8s %-8s %s\n", "seconds",
                               Seconds(t.checkpoint_ns()), Seconds(t.build_ns()),
                               Seconds(t.push_ns()), Seconds(t.pull_ns()), Seconds(t.restore_ns()),
                               Seconds(t.verify_ns()), Seconds(t.cutover_ns()),
                               Seconds(t.total_ns()));
}

}  // namespace

int RunMigrate(const Args& args) {
  if (args.positional.size() == 1 && !args.Has("from")) return MigrateWorkload(args);
  if (args.positional.size() != 1 || args.Get("from").empty() || args.Get("to").empty() ||
      args.Get("node").empty()) {
    std::cerr << kUsage << "\n";
    return 2;
  }
  auto address = CheckpointerOf(args.Get("from"), args);
  if (!address.ok()) return Fail("migrate", std::string(address.status().message()));
  auto channel = ChannelTo(*address, args);
  if (!channel.ok()) return Fail("migrate", std::string(channel.status().message()));
  auto stub = cp::CheckpointerService::NewStub(*channel);

  cp::MigrateContainerRequest request;
  request.mutable_source()->set_cluster(args.Get("from"));
  request.mutable_source()->set_pod(args.positional[0]);
  request.mutable_source()->set_container(args.Get("container"));
  request.set_target_cluster(args.Get("to"));
  request.set_target_node(args.Get("node"));
  request.set_target_pod(args.Get("as"));
  request.set_target_repository(args.Get("repository"));
  request.set_request_id(args.Get("request-id"));
  cp::MigrateContainerResponse started;
  {
    auto context = ContextWithTimeout(args, absl::Seconds(30));
    grpc::Status status = stub->MigrateContainer(context.get(), request, &started);
    if (!status.ok()) return Fail("migrate", status.error_message());
  }
  if (args.Has("no-wait")) {
    std::cout << started.operation().id() << "\n";
    return 0;
  }
  common::v1::Operation last;
  const int waited = WaitForOperation<cp::WatchOperationRequest, cp::WatchOperationResponse>(
      *stub, started.operation(), args, "migrate",
      {.line = ProgressLine, .timeout = absl::Minutes(30), .lost_prefix = "", .last = &last});
  if (waited != 0) return waited;
  cp::Checkpoint result;
  if (!last.result().UnpackTo(&result)) {
    return Fail("migrate", "operation " + last.id() + " finished without a result");
  }
  PrintResult(result);
  return 0;
}

}  // namespace codeco::ctl
