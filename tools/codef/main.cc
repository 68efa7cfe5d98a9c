// codef: hosts every cluster of a CODEF scenario in one process. Each cluster
// with nodes serves the emulated codeco.lms.v1.LmsService on its own loopback
// address (hub 127.0.1.1, i-th managed cluster 127.0.<i+2>.1); the link
// emulator (when built in) gives each cluster an egress relay that imposes the
// scenario's links; the control API (codeco.codef.v1.CodefService) injects
// faults. Prints one line per cluster and "codef control listening on ADDR",
// runs the scenario's fault timeline, and stops cleanly on SIGTERM or SIGINT.
// Each cluster with nodes also serves /metrics on its service IP: the
// node-exporter, cAdvisor and kube-state-metrics style series of its nodes
// and pods (core/kube_metrics.h), one "metrics CLUSTER http://..." line each.
// With --record it writes the scenario's metrics as CSV and, at exit, the
// experiment report (report.md + SVG plots) when `output.report` is on.
// A pod whose container is a Redis image runs a real redis-server on
// loopback (its data under <state-dir>/pods/, or a temporary directory),
// killed with the pod and at exit.
//
// `codef --simulate` instead runs the scenario in this process under a
// virtual clock (tools/codef/sim): the scheduler's core places the task
// stream, the fault timeline plays, and the CSV files and the report are
// written to --out (default: the scenario's output.dir). No sockets.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cluster_metrics.h"
#include "codeco/common/clock.h"
#include "codeco/common/config.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "codeco/common/quantity.h"
#include "codeco/common/server.h"
#include "codef_service.h"
#include "federation.h"
#include "file_archive_store.h"
#include "lms_service.h"
#include "nlohmann/json.hpp"
#include "recorder.h"
#include "redis_pod_processes.h"
#include "report.h"
#include "scenario.h"
#include "simulation.h"
#ifdef CODEF_HAVE_RELAY
#include "relay_link_control.h"
#endif

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;

ConfigSchema CodefSchema() {
  ConfigSchema schema;
  schema.Add({.path = "scenario", .required = true, .help = "scenario YAML file"});
  schema.Add({.path = "state_dir",
              .help = "directory for endpoints.json, checkpoint archives and the data of Redis "
                      "pods (archives in memory and Redis data in a temporary directory when "
                      "empty)"});
  schema.Add({.path = "redis_server",
              .default_value = "/usr/bin/redis-server",
              .help = "redis-server binary run for pods whose container is a Redis image (when "
                      "missing, those pods are bookkeeping only)"});
  schema.Add({.path = "control_listen",
              .type = ConfigType::kAddress,
              .default_value = "127.0.0.1:7100",
              .help = "host:port of the control API (loopback)"});
  schema.Add({.path = "lms_port",
              .type = ConfigType::kInt,
              .default_value = "7400",
              .help = "port of each cluster's LMS on its service IP (0 = any free port)"});
  schema.Add({.path = "metrics_port",
              .type = ConfigType::kInt,
              .default_value = "0",
              .help = "port of each cluster's Prometheus /metrics on its service IP (0 = any free "
                      "port; printed, in endpoints.json and in ListClusters)"});
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
  schema.Add({.path = "relay_realtime",
              .type = ConfigType::kBool,
              .default_value = "true",
              .help = "run the link emulator's connection threads under SCHED_FIFO so a busy "
                      "machine delays releases less (skipped without CAP_SYS_NICE)"});
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

// The scenario's own CAM files (paths it names, already resolved) besides
// what `traces` may read; simulate mode places those applications.
FileReader ReaderWithCams(const Scenario& scenario, FileReader traces) {
  std::set<std::string> cams;
  for (const CamRef& ref : scenario.workloads.cams) cams.insert(ref.file);
  return [cams, traces](const std::string& path) -> absl::StatusOr<std::string> {
    if (!cams.contains(path)) return traces(path);
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
}

absl::Status WriteTextFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

absl::Status WriteFiles(const fs::path& dir, const std::map<std::string, std::string>& files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir.string()));
  for (const auto& [name, text] : files) {
    absl::Status status = WriteTextFile(dir / name, text);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------ simulate ---

constexpr char kSimulateUsage[] =
    "usage: codef --simulate --scenario FILE [--out DIR] [--policy NAME]...\n"
    "             [--tick DURATION] [--duration DURATION]\n"
    "             [--cloud CLUSTER [--cloud-policy codeco|mck8s]] [--adapt]\n\n"
    "Runs the scenario in this process under a virtual clock: the SWM core places the\n"
    "task stream on the emulated clusters, the fault timeline plays, and the recorded\n"
    "CSV files plus report.md and SVG plots (when output.report is on) go to DIR.\n\n"
    "  --scenario FILE      scenario YAML (required)\n"
    "  --out DIR            output directory (default: the scenario's output.dir);\n"
    "                       with several --policy, one subdirectory per policy\n"
    "  --policy NAME        placement policy, repeatable (default codeco); one of\n"
    "                       POLICIES\n"
    "  --tick DURATION      scheduling cycle (default 10s)\n"
    "  --duration DURATION  how long to simulate (default: the scenario's)\n"
    "  --cloud CLUSTER      burst to CLUSTER as an on-demand cloud: it starts with no\n"
    "                       node; the hub's cloud autoscaler orders copies of its\n"
    "                       first node entry (5 min to the first Ready nodes, 2 min\n"
    "                       per added node) and gives them back when idle\n"
    "  --cloud-policy NAME  how the cloud is sized: codeco (default) or mck8s\n"
    "  --adapt              runtime adaptation: every 30 s the hub moves long-running\n"
    "                       tasks off failed clusters and overloaded nodes, and back\n"
    "                       after a recovery, under the migration governor's rules\n";

struct SimulateFlags {
  std::string scenario;
  std::string out;
  std::vector<std::string> policies;
  absl::Duration tick = absl::Seconds(10);
  absl::Duration duration = absl::ZeroDuration();
  std::string cloud;
  swm::CloudScalingPolicy cloud_policy = swm::CloudScalingPolicy::kPacked;
  bool cloud_policy_set = false;
  bool adapt = false;
  bool help = false;
};

absl::StatusOr<SimulateFlags> ParseSimulateFlags(int argc, char** argv) {
  SimulateFlags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--simulate") continue;
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (arg == "--adapt") {
      flags.adapt = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
    }
    std::string name = arg.substr(2);
    std::string value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name == "scenario" || name == "out" || name == "policy" || name == "tick" ||
               name == "duration" || name == "cloud" || name == "cloud-policy") {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": needs a value"));
      value = argv[++i];
    }
    if (name == "scenario") {
      flags.scenario = value;
    } else if (name == "out") {
      flags.out = value;
    } else if (name == "policy") {
      std::vector<std::string> known = SimulationPolicies();
      if (std::find(known.begin(), known.end(), value) == known.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--policy: unknown policy \"", value, "\" (one of ", absl::StrJoin(known, ", "), ")"));
      }
      if (std::find(flags.policies.begin(), flags.policies.end(), value) == flags.policies.end()) {
        flags.policies.push_back(value);
      }
    } else if (name == "cloud") {
      if (value.empty()) return absl::InvalidArgumentError("--cloud: needs a cluster name");
      flags.cloud = value;
    } else if (name == "cloud-policy") {
      absl::StatusOr<swm::CloudScalingPolicy> policy =
          swm::ParseCloudScalingPolicy(value, "--cloud-policy");
      if (!policy.ok()) return policy.status();
      flags.cloud_policy = *policy;
      flags.cloud_policy_set = true;
    } else if (name == "tick" || name == "duration") {
      absl::StatusOr<int64_t> ns = ParseDurationNanos(value);
      if (!ns.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", ns.status().message()));
      }
      if (name == "tick" && *ns <= 0) {
        return absl::InvalidArgumentError("--tick: must be positive");
      }
      if (name == "duration" && *ns <= 0) {
        return absl::InvalidArgumentError("--duration: must be positive");
      }
      (name == "tick" ? flags.tick : flags.duration) = absl::Nanoseconds(*ns);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name,
                       " (simulate mode: --scenario, --out, --policy, --tick, "
                       "--duration, --cloud, --cloud-policy, --adapt)"));
    }
  }
  if (flags.cloud_policy_set && flags.cloud.empty()) {
    return absl::InvalidArgumentError("--cloud-policy: only with --cloud CLUSTER");
  }
  if (flags.policies.empty()) flags.policies.push_back("codeco");
  if (!flags.help && flags.scenario.empty()) {
    return absl::InvalidArgumentError("--scenario: is required");
  }
  return flags;
}

int RunSimulate(int argc, char** argv) {
  absl::StatusOr<SimulateFlags> flags = ParseSimulateFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "codef: " << flags.status().message() << "\n(codef --simulate --help for usage)"
              << std::endl;
    return 2;
  }
  if (flags->help) {
    std::string usage = kSimulateUsage;
    usage.replace(usage.find("POLICIES"), 8, absl::StrJoin(SimulationPolicies(), ", "));
    std::cout << usage;
    return 0;
  }
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(flags->scenario);
  if (!scenario.ok()) {
    std::cerr << "codef: " << flags->scenario << ":\n" << scenario.status().message() << std::endl;
    return 2;
  }
  fs::path out_dir =
      flags->out.empty() ? fs::path(scenario->record.output_dir) : fs::path(flags->out);
  std::string base_dir = fs::path(flags->scenario).parent_path().string();
  std::vector<std::pair<std::string, RunSummary>> summaries;
  for (const std::string& policy : flags->policies) {
    SimulationOptions options{.policy = policy, .tick = flags->tick, .duration = flags->duration};
    if (!flags->cloud.empty()) {
      options.cloud = CloudBurstOptions{.cluster = flags->cloud};
      options.cloud->autoscaler.policy = flags->cloud_policy;
      // codeco's re-scheduler moves jobs with their state (its checkpointer);
      // the others move long-running tasks only, as mck8s's does.
      options.cloud->reschedule_jobs = policy == "codeco";
    }
    if (flags->adapt) options.adaptation = AdaptationOptions{};
    absl::Time wall_start = absl::Now();
    absl::StatusOr<SimulationResult> result =
        RunSimulation(*scenario, options, ReaderWithCams(*scenario, ReaderUnder(base_dir)));
    double wall_s = absl::ToDoubleSeconds(absl::Now() - wall_start);
    if (!result.ok()) {
      bool bad_input = absl::IsInvalidArgument(result.status());
      std::cerr << "codef: " << (bad_input ? flags->scenario + ": " : "")
                << result.status().message() << std::endl;
      return bad_input ? 2 : 1;
    }
    fs::path dir = flags->policies.size() == 1 ? out_dir : out_dir / policy;
    absl::Status written = WriteFiles(dir, result->csv);
    absl::StatusOr<RecordedRun> run = ReadRecordedRun(result->csv);
    if (!run.ok()) {
      std::cerr << "codef: " << run.status().message() << std::endl;
      return 1;
    }
    RunSummary summary = Summarize(*run);
    summaries.emplace_back(policy, summary);
    if (written.ok() && scenario->record.report) {
      ReportContext context{.scenario = scenario->name,
                            .mode = "simulate",
                            .policy = policy,
                            .duration_s = absl::ToDoubleSeconds(result->simulated),
                            .wall_s = wall_s,
                            .events = result->events,
                            .notes = result->notes};
      if (scenario->workloads.task_stream.has_value()) {
        const TaskCounts& t = result->tasks;
        context.tasks = t.generated;
        context.extra_rows.push_back(
            {"task pods",
             absl::StrCat(t.arrived, " arrived, ", t.pods_created, " bound, ", t.completed,
                          " jobs completed, ", t.pods_failed, " failed with their node, ",
                          t.waiting_at_end, " waiting at the end")});
        DemandFloor floor =
            ComputeDemandFloor(result->generated_tasks, result->placement_capacity_millicores,
                               absl::Nanoseconds(scenario->record.interval_ns), result->simulated);
        context.extra_rows.push_back(
            {"placement clusters",
             absl::StrCat(absl::StrJoin(result->placement_clusters, ", "), " (",
                          FormatCpu(result->placement_capacity_millicores), " CPUs)")});
        context.extra_rows.push_back(
            {"CPU demand peak; physical floor peak / mean",
             absl::StrFormat("%.1f CPUs; %s / %s", floor.peak_demand_cpus,
                             Percent(floor.floor_peak), Percent(floor.floor_mean))});
      }
      if (options.cloud.has_value()) {
        const CloudUsage& c = result->cloud;
        context.extra_rows.push_back(
            {"cloud " + flags->cloud,
             absl::StrFormat("%s provisioner: %.1f CPU-hours, %d nodes at most, %d ordered, %d "
                             "removed, %d pods placed there, %d moved back",
                             swm::CloudScalingPolicyName(flags->cloud_policy), c.cpu_hours,
                             c.peak_nodes, c.nodes_ordered, c.nodes_removed, c.pods_placed,
                             c.moved_back)});
      }
      context.extra_rows.push_back(
          {"scheduling tick; record interval",
           absl::StrCat(FormatDurationNanos(absl::ToInt64Nanoseconds(flags->tick)), "; ",
                        FormatDurationNanos(scenario->record.interval_ns))});
      for (const auto& [file, text] : result->csv) context.csv_files.push_back(file);
      written = WriteFiles(dir, BuildReport(context, *run, summary));
    }
    if (!written.ok()) {
      std::cerr << "codef: " << written.message() << std::endl;
      return 1;
    }
    std::cout << absl::StrFormat(
                     "policy %s: simulated %s in %.2f s wall; %d tasks; pending pods peak %s mean "
                     "%s; wrote %s",
                     policy, FormatDurationNanos(absl::ToInt64Nanoseconds(result->simulated)),
                     wall_s, result->tasks.generated, Percent(summary.pending_share_peak),
                     Percent(summary.pending_share_mean), dir.string())
              << std::endl;
    if (options.adaptation.has_value()) {
      std::cout << absl::StrFormat(
                       "  adaptation: %d moves, at most %d of one task within an hour, %d held "
                       "back",
                       result->adaptation.migrations.size(),
                       result->adaptation.max_moves_per_task_hour, result->adaptation.held_back)
                << std::endl;
    }
    if (options.cloud.has_value()) {
      std::cout << absl::StrFormat("  cloud %s (%s provisioner): %.1f CPU-hours, %d nodes at most",
                                   flags->cloud, swm::CloudScalingPolicyName(flags->cloud_policy),
                                   result->cloud.cpu_hours, result->cloud.peak_nodes)
                << std::endl;
    }
  }
  if (flags->policies.size() > 1 && scenario->record.report) {
    std::string md = absl::StrCat("# CODEF report: ", scenario->name, ", policies compared\n\n",
                                  ComparePolicies(summaries), "\nPer policy: ");
    std::vector<std::string> links;
    for (const std::string& policy : flags->policies) {
      links.push_back(absl::StrCat("[", policy, "](", policy, "/report.md)"));
    }
    absl::StrAppend(&md, absl::StrJoin(links, ", "), "\n");
    absl::Status status = WriteTextFile(out_dir / "report.md", md);
    if (!status.ok()) {
      std::cerr << "codef: " << status.message() << std::endl;
      return 1;
    }
  }
  return 0;
}

// Emulate mode's report, from the CSV files --record wrote.
absl::Status WriteEmulateReport(const Scenario& scenario, const fs::path& dir, double wall_s,
                                const std::vector<std::string>& events) {
  std::map<std::string, std::string> csv;
  for (const std::string& metric : scenario.record.metrics) {
    std::ifstream in(dir / (metric + ".csv"), std::ios::binary);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    csv[metric + ".csv"] = ss.str();
  }
  absl::StatusOr<RecordedRun> run = ReadRecordedRun(csv);
  if (!run.ok()) return run.status();
  RunSummary summary = Summarize(*run);
  ReportContext context{.scenario = scenario.name,
                        .mode = "emulate",
                        .duration_s = summary.last_time_s,
                        .wall_s = wall_s,
                        .events = events};
  context.notes.push_back(
      "emulate mode: codef does not see the scheduler's queue, so no pod is counted as waiting "
      "for a node; \"pods not running yet\" counts the pods bound but still Pending");
  for (const auto& [file, text] : csv) context.csv_files.push_back(file);
  return WriteFiles(dir, BuildReport(context, *run, summary));
}

int Run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--simulate") == 0) return RunSimulate(argc, argv);
  }
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
        << "             [--lms-port PORT] [--metrics-port PORT] [--tick DURATION]\n"
        << "             [--record [--output-dir DIR]]\n"
        << "       codef --simulate --scenario FILE [--out DIR] [--policy NAME]... (--simulate "
           "--help)\n\n"
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
  int64_t metrics_port = config->GetInt("metrics_port");
  if (metrics_port < 0 || metrics_port > 65535) {
    std::cerr << "codef: metrics_port: must be 0-65535" << std::endl;
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
  LinkEmulatorOptions emulator_options;
  emulator_options.realtime_priority = config->GetBool("relay_realtime");
  LinkEmulator emulator(emulator_options);
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
  // Redis pods are real redis-server processes. Declared before the
  // federation: its clusters go first, then this kills what is left.
  std::unique_ptr<RedisPodProcesses> pod_processes;
  {
    RedisPodProcessesOptions options;
    options.server_binary = config->GetString("redis_server");
    if (config->Has("state_dir")) {
      options.data_dir = config->GetString("state_dir");
    } else {
      options.data_dir =
          (fs::temp_directory_path() / absl::StrCat("codef-redis-", getpid())).string();
      options.remove_data_dir = true;
    }
    absl::StatusOr<std::unique_ptr<RedisPodProcesses>> made =
        RedisPodProcesses::Create(std::move(options));
    if (made.ok()) {
      pod_processes = std::move(*made);
    } else if (absl::IsFailedPrecondition(made.status())) {
      log::Warn("Redis pods are bookkeeping only",
                {{"reason", std::string(made.status().message())}});
    } else {
      return fail(made.status());
    }
  }
  std::string base_dir = fs::path(scenario_file).parent_path().string();
  absl::StatusOr<std::unique_ptr<Federation>> federation =
      Federation::Create(*scenario, RealClock::Default(), &links, archives.get(),
                         ReaderUnder(base_dir), pod_processes.get());
  if (!federation.ok()) return fail(federation.status());

  std::vector<std::unique_ptr<EmulatedLmsService>> services;
  std::vector<std::unique_ptr<GrpcServer>> servers;
  // After the federation: they stop serving before the clusters they read go.
  std::vector<std::unique_ptr<MetricsExposer>> exposers;
  nlohmann::json endpoints = {{"scenario", scenario->name}, {"clusters", nlohmann::json::array()}};
  for (const auto& [name, ip] : clusters) {
    std::string lms_address;
    std::string metrics_address;
    if (SynchronizedCluster* lms = (*federation)->FindLms(name)) {
      absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
          MetricsExposer::Start(absl::StrCat(ip, ":", metrics_port));
      if (!exposer.ok()) return fail(exposer.status());
      (*exposer)->AddCollectable(std::make_shared<ClusterMetricsCollector>(lms));
      metrics_address = (*exposer)->address();
      (*federation)->SetMetricsEndpoint(name, metrics_address);
      exposers.push_back(std::move(*exposer));
      services.push_back(std::make_unique<EmulatedLmsService>(lms, pod_processes.get()));
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
    if (!metrics_address.empty()) {
      std::cout << "metrics " << name << " http://" << metrics_address << "/metrics" << std::endl;
    }
    endpoints["clusters"].push_back({{"name", name},
                                     {"service_ip", ip},
                                     {"lms", lms_address},
                                     {"relay", relay},
                                     {"metrics", metrics_address}});
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
  std::vector<std::string> fault_events;  // written by the ticker, read after join
  std::thread ticker([&] {
    while (!stop.WaitForNotificationWithTimeout(tick)) {
      for (const std::string& line : (*federation)->Tick()) {
        log::Info("fault", {{"event", line}});
        fault_events.push_back(line);
      }
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
  if (recorder != nullptr) {
    for (auto& [file, out] : record_files) out->close();
    if (scenario->record.report) {
      absl::Status report = WriteEmulateReport(
          *scenario, output_dir, absl::ToDoubleSeconds(RealClock::Default().Now() - start),
          fault_events);
      if (!report.ok()) {
        log::Error("report failed", {{"error", std::string(report.message())}});
      } else {
        std::cout << "codef wrote " << (output_dir / "report.md").string() << std::endl;
      }
    }
  }
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
