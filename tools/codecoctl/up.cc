// codecoctl up --scenario FILE [--insecure] [--no-prometheus] [--auction] [--timeout 60s]
//              [--hub-replicas N] [--set SERVICE.KEY=VALUE ...]
//              [--set-members SERVICE.KEY=VALUE ...]
// codecoctl down
//
// Starts a whole federation on this machine: the CODEF emulator for the
// scenario (emulated clusters and the link emulator), the hub's services, every
// managed cluster's services (each cluster on its own loopback IP, calling
// other clusters through its relay), development certificates, and Prometheus
// when Debian's prometheus is installed: it scrapes every service and every
// emulated cluster's node/pod series from CODEF every 5 s and evaluates
// CODECO's recording rules (deploy/prometheus/codeco-rules.yml, copied into
// the run directory) every 5 s. Waits until all are healthy and the hub's
// NetMA has measured every link between two clusters (30 s at most), saves
// the run state, prints a summary.
//
// A scenario with `federation.mode: layered` makes a layered cluster tree: the
// ACM agent of a managed cluster with a `parent` registers and heartbeats with
// its parent's ACM (started on a fixed address), not the hub's.
//
// With --hub-replicas N (2 or 3), the hub keeps its ACM's and SWM's state in
// a three-member etcd cluster on loopback (Debian's etcd-server) and runs N
// replicas of each: one leads (elected by an etcd lease) and serves on the
// service's address; the others stand by and take over when it dies.
#include <curl/curl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpointer/image/local_registry.h"
#include "cli.h"
#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "codeco/common/etcd_client.h"
#include "codeco/common/ports.h"
#include "codeco/common/proto_util.h"
#include "federation_plan.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "launcher.h"
#include "network.h"
#include "prometheus_config.h"
#include "run_state.h"
#include "scenario.h"

namespace codeco::ctl {
namespace {

// Debian's Prometheus, started when installed.
constexpr char kPrometheusBinary[] = "/usr/bin/prometheus";

namespace fs = std::filesystem;

// Where the ports of the NetMAs and the managed clusters' SWMs and ACMs (which must be
// known before they start) are looked for on each cluster's IP: below the
// kernel's ephemeral range (32768-60999), so the many processes that bind
// port 0 meanwhile cannot be handed one of them.
constexpr int kNetmaPortsFrom = 17400;
constexpr int kSwmPortsFrom = 17500;
constexpr int kAcmPortsFrom = 17600;
constexpr int kCheckpointerPortsFrom = 17700;
constexpr int kPdlcPortsFrom = 17800;
// The hub ACM's and SWM's fixed address when replicated, and etcd's ports.
constexpr int kHubReplicaPortsFrom = 17900;
constexpr int kEtcdPortsFrom = 17950;
// How many members the hub's etcd cluster has.
constexpr int kEtcdMembers = 3;
// What a standing-by replica prints.
constexpr char kStandbyMarker[] = " standby: ";

// What a service prints once it serves, followed by its gRPC address.
constexpr char kListeningMarker[] = "listening on ";

// Path of a process's logs without extension: run_dir/logs/<cluster>-<service>.
std::string LogBase(const std::string& run_dir, const std::string& name) {
  return run_dir + "/logs/" + std::regex_replace(name, std::regex("/"), "-");
}

// A process started by this command, its state entry and where it logs.
struct Started {
  RunProcess process;
  std::string out_file;
};

class Upper {
 public:
  explicit Upper(const Args& args) : args_(args) {}

  int Run();

 private:
  absl::Status StartCodef();
  absl::Status ListClusters();
  absl::Status IssueCertificates(const std::vector<ProcessSpec>& specs);
  // The run's certificate directory (scripts/dev-ca.sh's DIR).
  std::string CertDir() const;
  // Runs `scripts/dev-ca.sh CertDir() ARGS`; its output goes to the run's
  // logs/dev-ca.log. "ca" makes the CA, and keeps one already made.
  absl::Status RunDevCa(const std::string& args) const;
  absl::Status StartServices(const std::vector<ProcessSpec>& specs);
  absl::Status WaitHealthy();
  // Waits (at most `limit`) until the hub's NetMA has measured every link
  // between two clusters: until then the placement treats a link as absent,
  // so an application applied at once would be kept inside one cluster.
  // Prints what is still missing when the time runs out; never fails.
  void WaitLinksMeasured(absl::Duration limit);
  // Whether this run starts Prometheus (installed and not --no-prometheus).
  bool PrometheusWanted() const;
  void StartPrometheus();
  absl::Status StartRegistry();
  // The hub's etcd cluster (--hub-replicas): members started, one read answered.
  absl::Status StartEtcd();
  // Puts `spec` (the hub ACM or SWM) on etcd with leader election, on a fixed
  // address its standbys share.
  absl::Status MakeReplicated(ProcessSpec& spec);
  // Starts replicas 1..N-1 of `spec` (replica 0 already leads) and waits until
  // each stands by.
  absl::Status StartStandbys(const ProcessSpec& spec);
  void PrintSummary(absl::Duration took) const;
  void Abort();

  absl::StatusOr<Started> Launch(const std::string& name, std::vector<std::string> argv,
                                 const std::string& marker);
  /// Path of a process's logs without extension: run_dir/logs/<cluster>-<service>.
  std::string LogBase(const std::string& name) const {
    return codeco::ctl::LogBase(state_.run_dir, name);
  }

  const Args& args_;
  // The identity this command issued for itself, used once services run.
  Args client_args_;
  RunState state_;
  // Where Prometheus listens, chosen before the services start ("" = none).
  std::string prometheus_listen_;
  absl::Time deadline_;
  std::vector<ClusterEndpoint> clusters_;
  std::vector<codeco::codef::v1::EmulatedCluster> emulated_;
  // Whom the managed clusters' agents report to (the scenario's federation.mode).
  codef::FederationMode mode_ = codef::FederationMode::kFlat;
  // Replicas of the hub ACM and SWM (--hub-replicas; 1: no etcd, no election).
  int hub_replicas_ = 1;
  // The hub etcd's client endpoints, host:port,... ("" without replicas).
  std::string etcd_endpoints_;
  // Where the next replicated service's fixed port is looked for.
  int next_replica_port_ = kHubReplicaPortsFrom;
};

absl::Status Upper::StartEtcd() {
  std::vector<int> client_ports, peer_ports;
  int next = kEtcdPortsFrom;
  for (int i = 0; i < kEtcdMembers; ++i) {
    for (std::vector<int>* ports : {&client_ports, &peer_ports}) {
      absl::StatusOr<int> port = FreePort("127.0.0.1", next);
      if (!port.ok()) return port.status();
      ports->push_back(*port);
      next = *port + 1;
    }
  }
  // Members authenticate each other and their clients (the hub ACM and
  // SWM, with their own certificates) by the run's CA, unless --insecure.
  TlsFiles tls;
  if (!state_.insecure) {
    const std::string& hub = clusters_.front().name;
    if (auto s = RunDevCa("ca"); !s.ok()) return s;
    if (auto s = RunDevCa("issue " + hub + " etcd"); !s.ok()) return s;
    tls = {.ca_file = CertDir() + "/ca.crt",
           .cert_file = absl::StrCat(CertDir(), "/", hub, "/etcd.crt"),
           .key_file = absl::StrCat(CertDir(), "/", hub, "/etcd.key")};
  }
  const std::string scheme = state_.insecure ? "http://" : "https://";
  std::vector<std::string> peers, clients;
  for (int i = 0; i < kEtcdMembers; ++i) {
    peers.push_back(absl::StrCat("etcd-", i, "=", scheme, "127.0.0.1:", peer_ports[i]));
    clients.push_back(absl::StrCat("127.0.0.1:", client_ports[i]));
  }
  for (int i = 0; i < kEtcdMembers; ++i) {
    auto started =
        Launch(absl::StrCat("hub/etcd-", i),
               EtcdMemberCommand({.name = absl::StrCat("etcd-", i),
                                  .data_dir = absl::StrCat(state_.run_dir, "/etcd/etcd-", i),
                                  .client_url = scheme + clients[i],
                                  .peer_url = absl::StrCat(scheme, "127.0.0.1:", peer_ports[i]),
                                  .initial_cluster = absl::StrJoin(peers, ","),
                                  .cluster_token = "codeco-hub",
                                  .tls = tls}),
               "");
    if (!started.ok()) return started.status();
    state_.processes.back().http = scheme + clients[i];
  }
  etcd_endpoints_ = absl::StrJoin(clients, ",");
  absl::Status ready = WaitForEtcd(clients, deadline_, tls);
  if (!ready.ok()) {
    return absl::Status(ready.code(),
                        absl::StrCat(ready.message(), " (see ", LogBase("hub/etcd-0"), ".log)"));
  }
  return absl::OkStatus();
}

absl::Status Upper::MakeReplicated(ProcessSpec& spec) {
  const ClusterEndpoint& hub = clusters_.front();
  absl::StatusOr<int> port = FreePort(hub.service_ip, next_replica_port_);
  if (!port.ok()) return port.status();
  next_replica_port_ = *port + 1;
  SetListen(absl::StrCat(hub.service_ip, ":", *port), spec);
  spec.args.insert(
      spec.args.end(),
      {"--set", "store.backend=etcd", "--set", "store.etcd.endpoints=" + etcd_endpoints_, "--set",
       "ha.leader_election=true", "--set", "ha.identity=" + spec.name});
  if (!state_.insecure) {
    // The replica's own certificate (IssueCertificates) is its etcd client identity.
    const std::string base = absl::StrCat(CertDir(), "/", spec.cluster, "/", spec.service);
    spec.args.insert(spec.args.end(), {"--set", "store.etcd.ca_file=" + CertDir() + "/ca.crt",
                                       "--set", "store.etcd.cert_file=" + base + ".crt", "--set",
                                       "store.etcd.key_file=" + base + ".key"});
  }
  return absl::OkStatus();
}

absl::Status Upper::StartStandbys(const ProcessSpec& spec) {
  std::string address;
  for (size_t i = 0; i + 1 < spec.args.size(); ++i) {
    if (spec.args[i] == "--listen") address = spec.args[i + 1];
  }
  for (int replica = 1; replica < hub_replicas_; ++replica) {
    const std::string name = absl::StrCat(spec.name, "-", replica);
    std::vector<std::string> argv = {BinDir() + "/" + spec.binary};
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--data-dir") argv[i + 1] += absl::StrCat("-", replica);
      if (argv[i + 1] == "ha.identity=" + spec.name) argv[i + 1] = "ha.identity=" + name;
    }
    auto started = Launch(name, argv, "");
    if (!started.ok()) return started.status();
    RunProcess& p = state_.processes.back();
    auto line = WaitForLine(started->out_file, kStandbyMarker, p.pid, deadline_);
    if (!line.ok()) {
      return absl::Status(line.status().code(), absl::StrCat(name, ": ", line.status().message(),
                                                             " (see ", LogBase(name), ".log)"));
    }
    // Its address is the leader's: restart and health checks reach whoever leads.
    p.grpc = address;
    std::smatch m;
    if (std::regex_search(*line, m, std::regex("metrics=(\\S+)\\)"))) p.http = m[1];
  }
  return absl::OkStatus();
}

absl::StatusOr<Started> Upper::Launch(const std::string& name, std::vector<std::string> argv,
                                      const std::string& marker) {
  std::string file = LogBase(name);
  auto pid = StartDetached(argv, file + ".out", file + ".log");
  if (!pid.ok()) return pid.status();
  Started started{{name, *pid, argv[0], "", "", false, argv}, file + ".out"};
  state_.processes.push_back(started.process);
  if (marker.empty()) return started;
  auto line = WaitForLine(started.out_file, marker, *pid, deadline_);
  if (!line.ok()) {
    return absl::Status(line.status().code(),
                        absl::StrCat(name, ": ", line.status().message(), " (see ", file, ".log)"));
  }
  started.process.grpc = line->substr(line->find(marker) + marker.size());
  started.process.grpc = started.process.grpc.substr(0, started.process.grpc.find(' '));
  state_.processes.back() = started.process;
  return started;
}

absl::Status Upper::StartCodef() {
  auto codef = Launch("codef",
                      {BinDir() + "/codef", "--scenario", state_.scenario, "--state-dir",
                       state_.run_dir + "/codef", "--control-listen", "127.0.0.1:0",
                       // Free ports: endpoints are read back through ListClusters.
                       "--lms-port", "0", "--metrics-port", "0"},
                      "codef control listening on ");
  if (!codef.ok()) return codef.status();
  state_.codef_control = codef->process.grpc;
  state_.processes.back().plaintext = true;  // loopback-only control API
  return absl::OkStatus();
}

absl::Status Upper::ListClusters() {
  auto channel = grpc::CreateChannel(state_.codef_control, grpc::InsecureChannelCredentials());
  auto stub = codeco::codef::v1::CodefService::NewStub(channel);
  std::string token;
  do {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    codeco::codef::v1::ListClustersRequest request;
    request.set_page_token(token);
    codeco::codef::v1::ListClustersResponse response;
    grpc::Status status = stub->ListClusters(&context, request, &response);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat("codef ListClusters: ", status.error_message()));
    }
    for (const auto& c : response.clusters()) {
      emulated_.push_back(c);
      clusters_.push_back(
          {c.name(), c.hub(), c.service_ip(), c.lms_endpoint(), c.relay_endpoint()});
      clusters_.back().parent = c.parent();
    }
    token = response.next_page_token();
  } while (!token.empty());
  if (clusters_.empty() || !clusters_.front().is_hub) {
    return absl::FailedPreconditionError("codef reported no hub cluster");
  }
  return absl::OkStatus();
}

std::string Upper::CertDir() const { return state_.run_dir + "/certs"; }

absl::Status Upper::RunDevCa(const std::string& args) const {
  const std::string command =
      absl::StrCat(CODECO_SOURCE_DIR, "/scripts/dev-ca.sh ", CertDir(), " ", args);
  if (std::system((command + " >>" + state_.run_dir + "/logs/dev-ca.log 2>&1").c_str()) != 0) {
    return absl::InternalError(absl::StrCat("certificate generation failed: ", command));
  }
  return absl::OkStatus();
}

absl::Status Upper::IssueCertificates(const std::vector<ProcessSpec>& specs) {
  if (auto s = RunDevCa("ca"); !s.ok()) return s;  // made already when etcd runs with TLS
  for (const auto& spec : specs) {
    std::string ip;
    for (const auto& c : clusters_) {
      if (c.name == spec.cluster) ip = c.service_ip;
    }
    if (auto s = RunDevCa(absl::StrCat("issue ", spec.cluster, " ", spec.service, " ", ip));
        !s.ok()) {
      return s;
    }
  }
  // codecoctl acts as the federation's operator (docs/security.md).
  const std::string dir = CertDir();
  const std::string& hub = clusters_.front().name;
  if (auto s = RunDevCa("operator " + hub); !s.ok()) return s;
  state_.ca_file = dir + "/ca.crt";
  state_.cert_file = dir + "/" + hub + "/operator.crt";
  state_.key_file = dir + "/" + hub + "/operator.key";
  return absl::OkStatus();
}

absl::Status Upper::StartServices(const std::vector<ProcessSpec>& specs) {
  // Start all, then wait for each: they come up in parallel.
  size_t first = state_.processes.size();
  for (const auto& spec : specs) {
    std::vector<std::string> argv = {BinDir() + "/" + spec.binary};
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    auto started = Launch(spec.name, argv, "");
    if (!started.ok()) return started.status();
  }
  for (size_t i = first; i < state_.processes.size(); ++i) {
    RunProcess& p = state_.processes[i];
    std::string file = LogBase(p.name);
    auto line = WaitForLine(file + ".out", kListeningMarker, p.pid, deadline_);
    if (!line.ok()) {
      return absl::Status(line.status().code(), absl::StrCat(p.name, ": ", line.status().message(),
                                                             " (see ", file, ".log)"));
    }
    std::smatch m;
    if (std::regex_search(*line, m, std::regex("listening on (\\S+) .*metrics=(\\S+)"))) {
      p.grpc = m[1];
      p.http = m[2];
    }
  }
  return absl::OkStatus();
}

absl::Status Upper::WaitHealthy() {
  for (const auto& p : state_.processes) {
    if (p.grpc.empty() || p.name == "codef") continue;
    auto channel = ChannelTo(p.grpc, client_args_);
    if (!channel.ok()) return channel.status();
    auto stub = grpc::health::v1::Health::NewStub(*channel);
    while (true) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
      grpc::health::v1::HealthCheckResponse response;
      grpc::Status s = stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
      if (s.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) break;
      if (absl::Now() > deadline_) {
        return absl::DeadlineExceededError(
            absl::StrCat(p.name, " at ", p.grpc, " is not healthy: ", s.error_message()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return absl::OkStatus();
}

void Upper::WaitLinksMeasured(absl::Duration limit) {
  std::set<std::pair<std::string, std::string>> missing;
  for (const auto& from : emulated_) {
    for (const auto& to : emulated_) {
      if (from.name() != to.name()) missing.insert({from.name(), to.name()});
    }
  }
  const size_t expected = missing.size();
  auto channel = ChannelTo(state_.netma, client_args_);
  if (!channel.ok() || expected == 0) return;
  auto stub = codeco::netma::v1::NetmaService::NewStub(*channel);
  const absl::Time end = std::min(deadline_, absl::Now() + limit);
  while (!missing.empty() && absl::Now() < end) {
    absl::StatusOr<codeco::netma::v1::ListLinksResponse> links =
        ListAllLinks(*stub, client_args_, absl::Seconds(5));
    if (links.ok()) {
      for (const auto& l : links->links()) {
        if (l.sample_count() > 0) missing.erase({l.source_cluster(), l.target_cluster()});
      }
    }
    if (!missing.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (missing.empty()) return;
  std::vector<std::string> named;
  for (const auto& [from, to] : missing) {
    if (named.size() == 5) break;
    named.push_back(from + " -> " + to);
  }
  std::cerr << "codecoctl up: NetMA has measured " << expected - missing.size() << " of "
            << expected << " links after " << absl::FormatDuration(limit)
            << " (not yet: " << absl::StrJoin(named, ", ")
            << (missing.size() > named.size() ? ", ..." : "")
            << "); until it does, placements treat those links as absent (codecoctl get links)\n";
}

// True once `url` answers 200 to a HEAD, polled until `deadline`.
bool AnswersOk(const std::string& url, absl::Time deadline) {
  while (absl::Now() < deadline) {
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 2L);
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    long code = 0;
    if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(curl);
    if (code == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Debian's docker-registry on loopback, for the checkpointers' images.
absl::Status Upper::StartRegistry() {
  const std::string binary = "/usr/bin/docker-registry";
  if (!fs::exists(binary)) {
    return absl::FailedPreconditionError(
        "no " + binary + ": stateful migration needs it (scripts/install-deps.sh installs it)");
  }
  auto port = FreePort("127.0.0.1");
  if (!port.ok()) return port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  const std::string config = state_.run_dir + "/registry.yml";
  std::ofstream(config) << checkpointer::LocalRegistryConfig(state_.run_dir + "/registry", address);
  auto started = Launch("registry", {binary, "serve", config}, "");
  if (!started.ok()) return started.status();
  state_.processes.back().http = "http://" + address;
  if (AnswersOk("http://" + address + "/v2/", deadline_)) {
    state_.registry = address;
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError("docker-registry did not answer on " + address + "; see " +
                                     state_.run_dir + "/logs");
}

// Prometheus is optional: a failure here is reported, not fatal.
bool Upper::PrometheusWanted() const {
  return !args_.Has("no-prometheus") && fs::exists(kPrometheusBinary);
}

void Upper::StartPrometheus() {
  const std::string binary = kPrometheusBinary;
  if (!PrometheusWanted() || prometheus_listen_.empty()) return;
  std::string config = state_.run_dir + "/prometheus.yml";
  PrometheusConfig prometheus;
  prometheus.comment = "Generated by codecoctl up for " + state_.scenario;
  // 5 s: the rules' [1m] windows hold 12 samples, and a load step shows
  // fully in them a minute (plus at most one interval) after it.
  prometheus.scrape_interval = absl::Seconds(5);
  prometheus.evaluation_interval = absl::Seconds(5);
  for (const auto& p : state_.processes) {
    if (p.http.empty() || p.name.find('/') == std::string::npos) continue;
    std::string target = std::regex_replace(p.http, std::regex("^http://|/metrics$"), "");
    prometheus.services.push_back({target,
                                   {{"cluster", p.name.substr(0, p.name.find('/'))},
                                    {"service", p.name.substr(p.name.find('/') + 1)}}});
  }
  for (const auto& c : emulated_) {
    if (c.metrics_endpoint().empty()) continue;
    prometheus.codef.push_back({c.metrics_endpoint(), {{"cluster", c.name()}}});
  }
  // The rules as they were at this run, next to its configuration.
  const std::string rules = state_.run_dir + "/codeco-rules.yml";
  std::error_code copy_error;
  fs::copy_file(RulesFileInSource(), rules, fs::copy_options::overwrite_existing, copy_error);
  if (copy_error) {
    std::cerr << "codecoctl up: no recording rules (" << RulesFileInSource() << ": "
              << copy_error.message() << ")\n";
  } else {
    prometheus.rule_files.push_back(rules);
  }
  std::ofstream(config) << PrometheusConfigYaml(prometheus);
  const std::string listen = prometheus_listen_;
  auto started = Launch(
      "prometheus",
      {binary, "--config.file=" + config, "--storage.tsdb.path=" + state_.run_dir + "/prometheus",
       "--web.listen-address=" + listen},
      "");
  if (!started.ok()) {
    std::cerr << "codecoctl up: Prometheus did not start: " << started.status().message() << "\n";
    return;
  }
  state_.processes.back().http = "http://" + listen;
  // Ready when /-/ready answers 200.
  if (AnswersOk("http://" + listen + "/-/ready", deadline_)) {
    state_.prometheus = "http://" + listen;
    return;
  }
  std::cerr << "codecoctl up: Prometheus did not become ready; see " << state_.run_dir
            << "/logs/prometheus.log\n";
}

void Upper::PrintSummary(absl::Duration took) const {
  std::printf("Federation up from %s in %.1f s (%zu processes, %s)\n\n", state_.scenario.c_str(),
              absl::ToDoubleSeconds(took), state_.processes.size(),
              state_.insecure ? "plaintext on loopback" : "mTLS");
  if (hub_replicas_ > 1) {
    std::printf("Hub ACM and SWM: %d replicas each, one leading; state in etcd at %s (%s)\n\n",
                hub_replicas_, etcd_endpoints_.c_str(),
                state_.insecure ? "plaintext on loopback" : "mTLS");
  }
  if (mode_ == codef::FederationMode::kLayered) {
    std::printf(
        "Layered tree: a cluster with a parent reports to its parent's ACM; the others to the "
        "hub's (codecoctl get tree)\n\n");
  }
  std::printf("%-16s %-9s %-12s %-6s %-12s %-22s %s\n", "CLUSTER", "TIER", "REGION", "NODES", "IP",
              "LMS", "RELAY");
  for (const auto& c : emulated_) {
    std::string tier = c.hub() ? "hub" : TierName(c.labels().tier());
    std::printf("%-16s %-9s %-12s %-6d %-12s %-22s %s\n", c.name().c_str(),
                tier.empty() ? "-" : tier.c_str(), c.labels().region().c_str(), c.node_count(),
                c.service_ip().c_str(), c.lms_endpoint().empty() ? "-" : c.lms_endpoint().c_str(),
                c.relay_endpoint().empty() ? "-" : c.relay_endpoint().c_str());
  }
  std::printf("\nACM (the API):  %s\n", state_.acm.c_str());
  std::printf("NetMA (hub):    %s (codecoctl get links | get costmap --metric delay)\n",
              state_.netma.c_str());
  std::printf("CODEF control:  %s\n", state_.codef_control.c_str());
  if (!state_.prometheus.empty()) std::printf("Prometheus:     %s\n", state_.prometheus.c_str());
  if (!state_.registry.empty())
    std::printf("Registry:       %s (checkpoint images)\n", state_.registry.c_str());
  std::printf("Run directory:  %s (logs/, data/, certs/)\n", state_.run_dir.c_str());
  std::printf(
      "\nNext: codecoctl health --all   codecoctl fault link A B --rtt 50ms   "
      "codecoctl down\n");
}

void Upper::Abort() {
  std::vector<pid_t> pids;
  std::vector<std::string> commands;
  for (auto it = state_.processes.rbegin(); it != state_.processes.rend(); ++it) {
    pids.push_back(it->pid);
    commands.push_back(it->command);
  }
  StopAll(pids, commands, absl::Seconds(10));
}

int Upper::Run() {
  absl::Time start = absl::Now();
  if (args_.Get("scenario").empty()) {
    std::cerr << "codecoctl up: --scenario FILE is required\n";
    return 2;
  }
  if (auto existing = LoadRunState(); existing.ok()) {
    for (const auto& p : existing->processes) {
      if (IsRunning(p.pid, p.command)) {
        std::cerr << "codecoctl up: a federation is already up (" << existing->scenario
                  << "); run codecoctl down first\n";
        return 1;
      }
    }
  }
  std::error_code ec;
  state_.scenario = fs::absolute(args_.Get("scenario"), ec).string();
  if (!fs::exists(state_.scenario)) {
    std::cerr << "codecoctl up: --scenario: no such file: " << args_.Get("scenario") << "\n";
    return 2;
  }
  absl::Duration timeout = absl::Seconds(60);
  if (args_.Has("timeout") && !absl::ParseDuration(args_.Get("timeout"), &timeout)) {
    std::cerr << "codecoctl up: --timeout: not a duration\n";
    return 2;
  }
  deadline_ = start + timeout;
  if (args_.Has("hub-replicas")) {
    if (!absl::SimpleAtoi(args_.Get("hub-replicas"), &hub_replicas_) || hub_replicas_ < 1 ||
        hub_replicas_ > 3) {
      std::cerr << "codecoctl up: --hub-replicas: a number from 1 to 3, not \""
                << args_.Get("hub-replicas") << "\"\n";
      return 2;
    }
    if (hub_replicas_ > 1 && access(kEtcdBinary, X_OK) != 0) {
      std::cerr << "codecoctl up: --hub-replicas needs etcd (" << kEtcdBinary
                << "; Debian package etcd-server, scripts/install-deps.sh installs it)\n";
      return 2;
    }
  }
  state_.insecure = args_.Has("insecure");
  state_.run_dir = absl::StrCat(CodecoHome(), "/runs/",
                                absl::FormatTime("%Y%m%d-%H%M%S", start, absl::LocalTimeZone()));
  fs::create_directories(state_.run_dir + "/logs", ec);
  if (ec) {
    std::cerr << "codecoctl up: cannot create " << state_.run_dir << ": " << ec.message() << "\n";
    return 1;
  }

  auto fail = [&](const absl::Status& status) {
    std::cerr << "codecoctl up: " << status.message() << "\nstopping what was started\n";
    Abort();
    return 1;
  };
  if (auto s = StartCodef(); !s.ok()) return fail(s);
  if (auto s = ListClusters(); !s.ok()) return fail(s);
  {
    // CODEF accepted the file; its federation.mode says whom the agents report to.
    absl::StatusOr<codef::Scenario> scenario = codef::LoadScenarioFile(state_.scenario);
    if (!scenario.ok()) return fail(scenario.status());
    mode_ = scenario->mode;
  }
  if (auto s = StartRegistry(); !s.ok()) return fail(s);
  if (hub_replicas_ > 1) {
    if (auto s = StartEtcd(); !s.ok()) return fail(s);
  }
  SecuritySettings security{state_.insecure, state_.run_dir + "/certs"};
  std::string data = state_.run_dir + "/data";
  // NetMAs learn their peers, and the hub SWM the clusters' SWMs, from
  // flags, so those ports are chosen up front.
  for (ClusterEndpoint& c : clusters_) {
    auto netma_port = FreePort(c.service_ip, kNetmaPortsFrom);
    if (!netma_port.ok()) return fail(netma_port.status());
    c.netma_address = absl::StrCat(c.service_ip, ":", *netma_port);
    if (c.is_hub) continue;
    auto swm_port = FreePort(c.service_ip, kSwmPortsFrom);
    if (!swm_port.ok()) return fail(swm_port.status());
    c.swm_address = absl::StrCat(c.service_ip, ":", *swm_port);
    auto acm_port = FreePort(c.service_ip, kAcmPortsFrom);
    if (!acm_port.ok()) return fail(acm_port.status());
    c.acm_address = absl::StrCat(c.service_ip, ":", *acm_port);
    auto checkpointer_port = FreePort(c.service_ip, kCheckpointerPortsFrom);
    if (!checkpointer_port.ok()) return fail(checkpointer_port.status());
    c.checkpointer_address = absl::StrCat(c.service_ip, ":", *checkpointer_port);
    auto pdlc_port = FreePort(c.service_ip, kPdlcPortsFrom);
    if (!pdlc_port.ok()) return fail(pdlc_port.status());
    c.pdlc_address = absl::StrCat(c.service_ip, ":", *pdlc_port);
    c.registry = state_.registry;
  }
  // Layered: each parent's ACM has its fixed address by now (set above).
  if (auto s = CheckReportingTree(clusters_, mode_); !s.ok()) return fail(s);
  state_.netma = clusters_.front().netma_address;
  std::vector<ProcessSpec> hub = PlanHub(clusters_, security, data, args_.Has("auction"));
  // --set SERVICE.KEY=VALUE: a setting of the hub's SERVICE; --set-members:
  // of SERVICE in every managed cluster (each service's own configuration
  // checks the key and the value when it starts).
  auto apply_settings = [&](const char* flag, std::vector<ProcessSpec>& specs,
                            const std::string& who) -> absl::Status {
    for (const std::string& setting : args_.GetAll(flag)) {
      const size_t dot = setting.find('.');
      const size_t eq = setting.find('=');
      if (dot == std::string::npos || eq == std::string::npos || dot == 0 || eq < dot) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, ": \"", setting,
                         "\" is not SERVICE.KEY=VALUE (e.g. swm.failure_grace=20s)"));
      }
      const std::string service = setting.substr(0, dot);
      bool found = false;
      for (ProcessSpec& spec : specs) {
        if (spec.service != service) continue;
        spec.args.insert(spec.args.end(), {"--set", setting});
        found = true;
      }
      if (!found) {
        std::set<std::string> runs;
        for (const ProcessSpec& spec : specs) runs.insert(spec.service);
        return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", who, " no service \"",
                                                       service, "\" (", absl::StrJoin(runs, ", "),
                                                       ")"));
      }
    }
    return absl::OkStatus();
  };
  if (auto s = apply_settings("set", hub, "the hub runs"); !s.ok()) return fail(s);
  {
    // Checked before anything starts.
    std::vector<ProcessSpec> members = PlanManagedClusters(clusters_, "", security, data, mode_);
    if (auto s = apply_settings("set-members", members, "the managed clusters run"); !s.ok()) {
      return fail(s);
    }
  }
  if (hub_replicas_ > 1) {
    for (ProcessSpec& spec : hub) {
      if (spec.service == "acm" || spec.service == "swm") {
        if (auto s = MakeReplicated(spec); !s.ok()) return fail(s);
      }
    }
  }
  if (!state_.insecure) {
    std::vector<ProcessSpec> all = hub;
    auto mcs = PlanManagedClusters(clusters_, "", security, data, mode_);
    all.insert(all.end(), mcs.begin(), mcs.end());
    if (auto s = IssueCertificates(all); !s.ok()) return fail(s);
  }
  // The hub's SWM (and the others) first; ACM then learns where SWM is. The
  // hub's SWM reaches every managed cluster through that cluster's SWM and
  // plans with NetMA's topology: CODEF's control API is not on its path.
  ProcessSpec hub_acm = hub.back();
  hub.pop_back();
  // The hub's NetMA is the SDN controller of the relays (the emulated edge
  // devices): it installs each virtual link there through CODEF's control API.
  for (ProcessSpec& spec : hub) {
    if (spec.service == "netma") {
      spec.args.insert(spec.args.end(), {"--set", "netma.codef_control=" + state_.codef_control});
    }
  }
  // The hub's MDM first: its SWM reads the data sets there.
  auto mdm_spec =
      std::find_if(hub.begin(), hub.end(), [](const ProcessSpec& p) { return p.service == "mdm"; });
  ProcessSpec hub_mdm = *mdm_spec;
  hub.erase(mdm_spec);
  if (auto s = StartServices({hub_mdm}); !s.ok()) return fail(s);
  for (const auto& p : state_.processes) {
    if (p.name == clusters_.front().name + "/mdm") {
      for (ProcessSpec& spec : hub) {
        if (spec.service == "swm")
          spec.args.insert(spec.args.end(), {"--set", "swm.mdm=" + p.grpc});
      }
    }
  }
  if (auto s = StartServices(hub); !s.ok()) return fail(s);
  for (const auto& spec : hub) {
    if (spec.service != "swm") continue;
    if (auto s = StartStandbys(spec); !s.ok()) return fail(s);
  }
  for (const auto& p : state_.processes) {
    if (p.name == clusters_.front().name + "/swm") state_.swm = p.grpc;
  }
  hub_acm.args.insert(hub_acm.args.end(), {"--set", "acm.swm=" + state_.swm});
  if (auto s = StartServices({hub_acm}); !s.ok()) return fail(s);
  if (auto s = StartStandbys(hub_acm); !s.ok()) return fail(s);
  for (const auto& p : state_.processes) {
    if (p.name == clusters_.front().name + "/acm") state_.acm = p.grpc;
  }
  // Each cluster's PDLC pulls its recording rules' series from the one
  // Prometheus, started last at an address chosen now.
  std::vector<ProcessSpec> managed =
      PlanManagedClusters(clusters_, state_.acm, security, data, mode_);
  if (auto s = apply_settings("set-members", managed, "the managed clusters run"); !s.ok()) {
    return fail(s);
  }
  if (PrometheusWanted()) {
    auto port = FreePort("127.0.0.1");
    if (port.ok()) {
      prometheus_listen_ = absl::StrCat("127.0.0.1:", *port);
      for (ProcessSpec& spec : managed) {
        if (spec.service == "pdlc") {
          // Refreshed at the scrape interval, so a new sample shows at once.
          spec.args.insert(spec.args.end(),
                           {"--set", "pdlc.prometheus_url=http://" + prometheus_listen_, "--set",
                            "pdlc.refresh_interval=5s"});
        }
      }
    }
  }
  if (auto s = StartServices(managed); !s.ok()) return fail(s);
  // From here on, this command's own identity is the one it issued.
  client_args_.flags = {
      {"ca", state_.ca_file}, {"cert", state_.cert_file}, {"key", state_.key_file}};
  if (state_.insecure) client_args_.flags = {{"insecure", "true"}};
  if (auto s = WaitHealthy(); !s.ok()) return fail(s);
  WaitLinksMeasured(absl::Seconds(30));
  StartPrometheus();
  if (auto s = SaveRunState(state_); !s.ok()) return fail(s);
  PrintSummary(absl::Now() - start);
  return 0;
}

}  // namespace

int RunUp(const Args& args) {
  Upper upper(args);
  return upper.Run();
}

int RunDown(const Args& args) {
  auto state = LoadRunState();
  if (!state.ok()) {
    std::cerr << "codecoctl down: " << state.status().message() << "\n";
    return state.status().code() == absl::StatusCode::kNotFound ? 0 : 1;
  }
  std::vector<pid_t> pids;
  std::vector<std::string> commands;
  // Reverse start order: clusters before the hub, the emulator last.
  for (auto it = state->processes.rbegin(); it != state->processes.rend(); ++it) {
    pids.push_back(it->pid);
    commands.push_back(it->command);
  }
  int killed = StopAll(pids, commands, absl::Seconds(20));
  RemoveRunState();
  std::cout << "Stopped " << pids.size() << " processes"
            << (killed > 0 ? absl::StrCat(" (", killed, " needed SIGKILL)") : "") << "; run data "
            << "kept in " << state->run_dir << "\n";
  return 0;
}

int RunRestart(const Args& args) {
  if (args.positional.size() != 1) {
    std::cerr << "codecoctl restart: give one process, e.g. codecoctl restart hub/acm\n";
    return 2;
  }
  const std::string& name = args.positional[0];
  absl::Duration down_for = absl::ZeroDuration();
  if (args.Has("down-for") &&
      (!absl::ParseDuration(args.Get("down-for"), &down_for) || down_for < absl::ZeroDuration())) {
    std::cerr << "codecoctl restart: --down-for: not a duration such as 60s: \""
              << args.Get("down-for") << "\"\n";
    return 2;
  }
  auto state = LoadRunState();
  if (!state.ok()) {
    std::cerr << "codecoctl restart: " << state.status().message() << "\n";
    return 1;
  }
  RunProcess* process = nullptr;
  std::vector<std::string> names;
  for (RunProcess& p : state->processes) {
    names.push_back(p.name);
    if (p.name == name) process = &p;
  }
  if (process == nullptr) {
    std::cerr << "codecoctl restart: no process \"" << name
              << "\" in this federation; it runs: " << absl::StrJoin(names, ", ") << "\n";
    return 2;
  }
  if (process->argv.empty() || process->grpc.empty()) {
    std::cerr << "codecoctl restart: " << name
              << " cannot be restarted (no command line or address recorded)\n";
    return 1;
  }
  // Stopped (SIGKILL with --kill: a crash), then started again on the same
  // addresses, so every peer configured with them reaches it again.
  if (IsRunning(process->pid, process->command)) {
    if (args.Has("kill")) {
      kill(process->pid, SIGKILL);
      for (absl::Time end = absl::Now() + absl::Seconds(10);
           IsRunning(process->pid, process->command) && absl::Now() < end;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } else {
      StopAll({process->pid}, {process->command}, absl::Seconds(20));
    }
  }
  absl::SleepFor(down_for);
  std::vector<std::string> argv = process->argv;
  const std::string metrics =
      std::regex_replace(process->http, std::regex("^http://|/metrics$"), "");
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--listen") argv[i + 1] = process->grpc;
    if (argv[i] == "--metrics-listen" && !metrics.empty()) argv[i + 1] = metrics;
  }
  const std::string base = LogBase(state->run_dir, name);
  auto pid = StartDetached(argv, base + ".out", base + ".log");
  if (!pid.ok()) {
    std::cerr << "codecoctl restart: " << pid.status().message() << "\n";
    return 1;
  }
  // A replica of a replicated hub service comes back leading or standing by.
  const bool replica = std::find(argv.begin(), argv.end(), "ha.leader_election=true") != argv.end();
  std::vector<std::string> markers = {kListeningMarker};
  if (replica) markers.push_back(kStandbyMarker);
  auto line = WaitForAnyLine(base + ".out", markers, *pid, absl::Now() + absl::Seconds(60));
  if (!line.ok()) {
    std::cerr << "codecoctl restart: " << name << ": " << line.status().message() << " (see "
              << base << ".log)\n";
    return 1;
  }
  process->pid = *pid;
  if (auto saved = SaveRunState(*state); !saved.ok()) {
    std::cerr << "codecoctl restart: " << saved.message() << "\n";
    return 1;
  }
  std::cout << "Restarted " << name << " (pid " << *pid << ") on " << process->grpc
            << (line->find(kStandbyMarker) != std::string::npos ? ", standing by" : "") << "\n";
  return 0;
}

}  // namespace codeco::ctl
