#pragma once
// The settings every codeco service binary shares (role, addresses, data
// directory, TLS files, logging, deadlines, store durability), declared once
// as a ConfigSchema and read into a typed struct.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/common/config.h"

namespace codeco {

/// The part a service plays in the federation.
enum class Role { kHub, kManagedCluster };

/// "hub" or "mc".
const char* RoleName(Role role);

/// Files for mutual TLS; re-read every `refresh_interval` so rotated
/// certificates take effect without a restart.
struct TlsFiles {
  /// PEM bundle of the CA(s) that peers' certificates must chain to.
  std::string ca_file;
  /// PEM certificate chain of this process.
  std::string cert_file;
  /// PEM private key of `cert_file`.
  std::string key_file;
  /// How often the files are checked for changes.
  absl::Duration refresh_interval = absl::Seconds(60);
};

/// Typed common settings of a service process.
struct ServiceConfig {
  /// Short service name, e.g. "acm" (used in metric names and logs).
  std::string service;
  /// hub or mc.
  Role role = Role::kHub;
  /// Name of the cluster this process belongs to.
  std::string cluster;
  /// gRPC listen address host:port (port 0 picks a free port).
  std::string listen;
  /// Prometheus /metrics listen address host:port (port 0 picks one).
  std::string metrics_listen;
  /// Directory of the service's RocksDB.
  std::string data_dir;
  /// Plaintext gRPC; only accepted when `listen` is a loopback address.
  bool insecure = false;
  /// mTLS files (required unless `insecure`).
  TlsFiles tls;
  /// host:port of the cluster's egress HTTP CONNECT proxy for calls to other
  /// clusters (the link emulator's relay in CODEF); empty for direct calls.
  std::string egress_proxy;
  /// Name of the federation's hub cluster, against which callers are
  /// authorized: `cluster` on the hub, the federation.hub_cluster key on an MC
  /// (required there unless insecure).
  std::string hub_cluster;
  /// host:port of the hub's ACM (MC role: where the agent registers); empty on the hub.
  std::string hub_acm;
  /// host:port of this cluster's local management system (codeco.lms.v1): the
  /// CODEF emulator or the Kubernetes adapter; empty when the service needs none.
  std::string lms;
  /// The LMS endpoints (and CODEF's control API) speak plaintext: true for the
  /// CODEF emulator on loopback, false for a Kubernetes adapter behind mTLS.
  bool lms_plaintext = false;
  /// Deadline a served call gets when its caller set none (ServedDeadline).
  absl::Duration default_deadline = absl::Seconds(30);
  /// Longest a call may run on this server regardless of the client's deadline.
  absl::Duration max_deadline = absl::Minutes(10);
  /// fsync the RocksDB WAL on every write (survives power loss, not only a
  /// process kill).
  bool store_sync = true;
  /// RocksDB block cache in bytes (`store.block_cache`).
  size_t store_block_cache_bytes = 32u << 20;
  /// Memory all RocksDB memtables may hold together (`store.memtable_budget`).
  size_t store_memtable_budget_bytes = 16u << 20;
  /// Where the service's state lives: RocksDB under data_dir (false, the
  /// default) or an etcd cluster (`store.backend: etcd`).
  bool store_on_etcd = false;
  /// etcd member client endpoints, host:port (`store.etcd.endpoints`).
  std::vector<std::string> etcd_endpoints;
  /// Key prefix of this service's state in etcd (`store.etcd.prefix`;
  /// default /codeco/<cluster>/<service>/).
  std::string etcd_prefix;
  /// TLS to etcd (`store.etcd.*_file`); empty ca_file: plaintext on loopback.
  TlsFiles etcd_tls;
  /// Longest one etcd call may take over all members (`store.etcd.timeout`).
  absl::Duration etcd_timeout = absl::Seconds(10);
  /// Run as one of several replicas with one leader elected through etcd
  /// (`ha.leader_election`); standbys wait and do not serve.
  bool leader_election = false;
  /// Lease time to live of the leader (`ha.lease_ttl`): how long a dead
  /// leader blocks the standbys.
  absl::Duration lease_ttl = absl::Seconds(5);
  /// This replica's name in the election (`ha.identity`; default the host
  /// name); the process id is appended.
  std::string ha_identity;
  /// How long in-flight calls may finish after SIGTERM.
  absl::Duration shutdown_grace = absl::Seconds(10);
  /// The whole validated configuration, for service-specific keys.
  Config raw;
};

/// The schema of the common keys, to which a service adds its own.
ConfigSchema CommonServiceSchema();

/// Reads the common keys of `config` into a ServiceConfig for `service` and
/// checks the rules between keys (TLS files unless insecure, insecure only on
/// loopback). Errors name the keys.
absl::StatusOr<ServiceConfig> ReadServiceConfig(const std::string& service, const Config& config);

/// True when `host_port`'s host is a loopback address (127.0.0.0/8, ::1,
/// localhost).
bool IsLoopbackAddress(const std::string& host_port);

}  // namespace codeco
