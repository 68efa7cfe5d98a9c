#include "codeco/common/service_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codeco/common/config.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"

namespace codeco {

const char* RoleName(Role role) { return role == Role::kHub ? "hub" : "mc"; }

ConfigSchema CommonServiceSchema() {
  ConfigSchema schema;
  schema
      .Add({"role",
            ConfigType::kEnum,
            "",
            {"hub", "mc"},
            true,
            "part this process plays: hub (federation control) or mc (managed cluster)"})
      .Add({"cluster",
            ConfigType::kString,
            "hub",
            {},
            false,
            "name of the cluster this process belongs to"})
      .Add({"listen",
            ConfigType::kAddress,
            "127.0.0.1:0",
            {},
            false,
            "gRPC listen address (port 0 picks a free port)"})
      .Add({"metrics_listen",
            ConfigType::kAddress,
            "127.0.0.1:0",
            {},
            false,
            "Prometheus /metrics listen address (port 0 picks a free port)"})
      .Add({"data_dir", ConfigType::kString, "", {}, true, "directory of the service's RocksDB"})
      .Add({"insecure",
            ConfigType::kBool,
            "false",
            {},
            false,
            "plaintext gRPC, accepted only on loopback (local development)"})
      .Add({"tls.ca_file", ConfigType::kString, "", {}, false, "PEM CA bundle peers must chain to"})
      .Add({"tls.cert_file", ConfigType::kString, "", {}, false, "PEM certificate chain"})
      .Add({"tls.key_file", ConfigType::kString, "", {}, false, "PEM private key"})
      .Add({"tls.refresh_interval",
            ConfigType::kDuration,
            "60s",
            {},
            false,
            "how often rotated TLS files are re-read"})
      .Add({"network.egress_proxy",
            ConfigType::kAddress,
            "",
            {},
            false,
            "HTTP CONNECT proxy for calls to other clusters (CODEF: the cluster's relay)"})
      .Add({"federation.hub_acm",
            ConfigType::kAddress,
            "",
            {},
            false,
            "the hub ACM's address (MC role: where this cluster registers)"})
      .Add({"federation.hub_cluster",
            ConfigType::kString,
            "",
            {},
            false,
            "name of the hub cluster (MC role, required with mTLS; the hub uses its own cluster)"})
      .Add({"federation.lms",
            ConfigType::kAddress,
            "",
            {},
            false,
            "this cluster's local management system (codeco.lms.v1) address"})
      .Add({"federation.lms_plaintext",
            ConfigType::kBool,
            "false",
            {},
            false,
            "LMS endpoints and CODEF's control API speak plaintext (CODEF on loopback)"})
      .Add({"log.level",
            ConfigType::kEnum,
            "info",
            {"debug", "info", "warn", "error"},
            false,
            "minimum level of log lines"})
      .Add({"rpc.default_deadline",
            ConfigType::kDuration,
            "30s",
            {},
            false,
            "deadline a served call gets when its caller set none (the calls it makes "
            "inherit it)"})
      .Add({"rpc.max_deadline",
            ConfigType::kDuration,
            "10m",
            {},
            false,
            "longest a call may run on this server"})
      .Add({"store.sync",
            ConfigType::kBool,
            "true",
            {},
            false,
            "fsync the write-ahead log on every write (survives power loss)"})
      .Add({"store.block_cache",
            ConfigType::kString,
            "32Mi",
            {},
            false,
            "RocksDB block cache (data, index and filter blocks), bytes: e.g. 32Mi"})
      .Add({"store.memtable_budget",
            ConfigType::kString,
            "16Mi",
            {},
            false,
            "memory all RocksDB memtables may hold together before the largest is "
            "flushed, bytes: e.g. 16Mi"})
      .Add({"store.backend",
            ConfigType::kEnum,
            "rocksdb",
            {"rocksdb", "etcd"},
            false,
            "where state lives: rocksdb (embedded, under data_dir) or etcd (a replicated hub)"})
      .Add({"store.etcd.endpoints",
            ConfigType::kString,
            "",
            {},
            false,
            "etcd member client endpoints, host:port,host:port (store.backend etcd)"})
      .Add(
          {"store.etcd.prefix",
           ConfigType::kString,
           "",
           {},
           false,
           "key prefix of the state in etcd, ending in '/' (default /codeco/<cluster>/<service>/)"})
      .Add({"store.etcd.ca_file",
            ConfigType::kString,
            "",
            {},
            false,
            "PEM CA bundle etcd's server certificates chain to (empty: plaintext, loopback only)"})
      .Add({"store.etcd.cert_file",
            ConfigType::kString,
            "",
            {},
            false,
            "PEM client certificate presented to etcd"})
      .Add({"store.etcd.key_file",
            ConfigType::kString,
            "",
            {},
            false,
            "PEM private key of store.etcd.cert_file"})
      .Add({"store.etcd.timeout",
            ConfigType::kDuration,
            "10s",
            {},
            false,
            "longest one etcd call may take, over every member it tries"})
      .Add({"ha.leader_election",
            ConfigType::kBool,
            "false",
            {},
            false,
            "run as one of several replicas, one leader elected by an etcd lease; a standby "
            "waits without serving (needs store.backend etcd)"})
      .Add({"ha.lease_ttl",
            ConfigType::kDuration,
            "5s",
            {},
            false,
            "leader lease time to live, 2s-60s: how long a dead leader blocks the standbys"})
      .Add({"ha.identity",
            ConfigType::kString,
            "",
            {},
            false,
            "this replica's name in the election, followed by /<pid> (default <hostname>)"})
      .Add({"shutdown.grace",
            ConfigType::kDuration,
            "10s",
            {},
            false,
            "time in-flight calls get to finish after SIGTERM"});
  return schema;
}

bool IsLoopbackAddress(const std::string& host_port) {
  std::string host = host_port.substr(0, host_port.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

namespace {

// The etcd store and leader election settings, checked together.
void CheckEtcdSettings(const Config& config, ServiceConfig& out, FieldErrors& errors) {
  const std::string endpoints = config.GetString("store.etcd.endpoints");
  for (absl::string_view entry : absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
    std::string endpoint(absl::StripAsciiWhitespace(entry));
    absl::Status valid = CheckHostPort("store.etcd.endpoints", endpoint);
    if (!valid.ok()) {
      errors.Add("store.etcd.endpoints", absl::StrCat("\"", endpoint, "\" is not host:port"));
    } else {
      out.etcd_endpoints.push_back(std::move(endpoint));
    }
  }
  if (out.store_on_etcd && endpoints.empty()) {
    errors.Add("store.etcd.endpoints", "required when store.backend is etcd");
  }
  if (out.etcd_prefix.back() != '/') errors.Add("store.etcd.prefix", "must end with '/'");
  const bool any_tls = !out.etcd_tls.ca_file.empty() || !out.etcd_tls.cert_file.empty() ||
                       !out.etcd_tls.key_file.empty();
  if (any_tls) {
    for (const char* key : {"store.etcd.ca_file", "store.etcd.cert_file", "store.etcd.key_file"}) {
      if (config.GetString(key).empty()) errors.Add(key, "required with the other etcd TLS files");
    }
  } else if (out.store_on_etcd) {
    for (const std::string& endpoint : out.etcd_endpoints) {
      if (!IsLoopbackAddress(endpoint)) {
        errors.Add("store.etcd.endpoints",
                   absl::StrCat("plaintext to etcd is allowed only on loopback, but ", endpoint,
                                " is not; configure store.etcd.ca_file, cert_file and key_file"));
        break;
      }
    }
  }
  if (out.etcd_timeout < absl::Milliseconds(100)) {
    errors.Add("store.etcd.timeout", "must be at least 100ms");
  }
  if (out.leader_election && !out.store_on_etcd) {
    errors.Add("ha.leader_election", "needs store.backend etcd (replicas share their state there)");
  }
  if (out.lease_ttl < absl::Seconds(2) || out.lease_ttl > absl::Seconds(60)) {
    errors.Add("ha.lease_ttl", absl::StrCat("must be between 2s and 60s, not ",
                                            absl::FormatDuration(out.lease_ttl)));
  }
}

}  // namespace

absl::StatusOr<ServiceConfig> ReadServiceConfig(const std::string& service, const Config& config) {
  ServiceConfig out;
  out.service = service;
  out.role = config.GetString("role") == "hub" ? Role::kHub : Role::kManagedCluster;
  out.cluster = config.GetString("cluster");
  out.listen = config.GetString("listen");
  out.metrics_listen = config.GetString("metrics_listen");
  out.data_dir = config.GetString("data_dir");
  out.insecure = config.GetBool("insecure");
  out.tls.ca_file = config.GetString("tls.ca_file");
  out.tls.cert_file = config.GetString("tls.cert_file");
  out.tls.key_file = config.GetString("tls.key_file");
  out.tls.refresh_interval = config.GetDuration("tls.refresh_interval");
  out.egress_proxy = config.GetString("network.egress_proxy");
  out.hub_acm = config.GetString("federation.hub_acm");
  out.hub_cluster =
      out.role == Role::kHub ? out.cluster : config.GetString("federation.hub_cluster");
  out.lms = config.GetString("federation.lms");
  out.lms_plaintext = config.GetBool("federation.lms_plaintext");
  out.default_deadline = config.GetDuration("rpc.default_deadline");
  out.max_deadline = config.GetDuration("rpc.max_deadline");
  out.store_sync = config.GetBool("store.sync");
  out.store_on_etcd = config.GetString("store.backend") == "etcd";
  out.etcd_prefix = config.GetString("store.etcd.prefix");
  if (out.etcd_prefix.empty()) {
    out.etcd_prefix = absl::StrCat("/codeco/", out.cluster, "/", service, "/");
  }
  out.etcd_tls.ca_file = config.GetString("store.etcd.ca_file");
  out.etcd_tls.cert_file = config.GetString("store.etcd.cert_file");
  out.etcd_tls.key_file = config.GetString("store.etcd.key_file");
  out.etcd_timeout = config.GetDuration("store.etcd.timeout");
  out.leader_election = config.GetBool("ha.leader_election");
  out.lease_ttl = config.GetDuration("ha.lease_ttl");
  out.ha_identity = config.GetString("ha.identity");
  out.shutdown_grace = config.GetDuration("shutdown.grace");
  out.raw = config;

  FieldErrors errors;
  if (out.role == Role::kHub && !config.GetString("federation.hub_cluster").empty() &&
      config.GetString("federation.hub_cluster") != out.cluster) {
    errors.Add(
        "federation.hub_cluster",
        absl::StrCat("a hub is its own hub cluster: must be empty or \"", out.cluster, "\""));
  }
  if (out.role == Role::kManagedCluster && !out.insecure && out.hub_cluster.empty()) {
    errors.Add("federation.hub_cluster", "required for role mc unless insecure");
  }
  if (out.insecure) {
    if (!IsLoopbackAddress(out.listen)) {
      errors.Add("insecure", absl::StrCat("plaintext is allowed only on loopback, but listen is ",
                                          out.listen, "; configure tls.* instead"));
    }
  } else {
    for (const char* key : {"tls.ca_file", "tls.cert_file", "tls.key_file"}) {
      if (!config.Has(key)) errors.Add(key, "required unless insecure is true");
    }
  }
  if (out.tls.refresh_interval < absl::Seconds(1)) {
    errors.Add("tls.refresh_interval", "must be at least 1s");
  }
  if (out.default_deadline <= absl::ZeroDuration()) {
    errors.Add("rpc.default_deadline", "must be positive");
  }
  if (out.max_deadline <= absl::ZeroDuration()) errors.Add("rpc.max_deadline", "must be positive");
  // Store budgets: a quantity of bytes, at least 1 MiB (RocksDB rounds
  // smaller ones up) and at most 64 GiB.
  auto store_bytes = [&](const char* key, size_t& field) {
    absl::StatusOr<int64_t> bytes = ParseBytes(config.GetString(key));
    if (!bytes.ok()) {
      errors.Add(key, std::string(bytes.status().message()));
    } else if (*bytes < (int64_t{1} << 20) || *bytes > (int64_t{64} << 30)) {
      errors.Add(key, absl::StrCat("must be between 1Mi and 64Gi, not ", config.GetString(key)));
    } else {
      field = static_cast<size_t>(*bytes);
    }
  };
  store_bytes("store.block_cache", out.store_block_cache_bytes);
  store_bytes("store.memtable_budget", out.store_memtable_budget_bytes);
  CheckEtcdSettings(config, out, errors);
  RETURN_IF_ERROR(errors.ToStatus());
  return out;
}

}  // namespace codeco
