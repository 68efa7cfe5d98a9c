#pragma once
// The CODEF link emulator (DESIGN section 6): every emulated cluster's
// services listen on their own loopback address (127.0.N.1), and each cluster
// has one egress relay, an HTTP CONNECT proxy. The relay reads the destination
// from CONNECT, maps its IP to a cluster, and shapes the bytes both ways with
// the directed links' conditions (latency, bandwidth, loss, cut), which can
// change at run time. The shaping model is ShapedPipe's; this class only moves
// bytes between sockets and releases them when the pipe says so.
//
// How a client in cluster A reaches a service of cluster B through A's relay
// (checked with gRPC 1.51 by link_emulator_test):
//
//   grpc::ChannelArguments args;
//   args.SetString("grpc.http_proxy", "http://" + relay_address_of_A);  // GRPC_ARG_HTTP_PROXY
//   auto channel = grpc::CreateCustomChannel("127.0.3.1:50051", credentials, args);
//
// - The target must name B's service IP (not "localhost"): the relay maps the
//   CONNECT host to a cluster by IP, and answers 403 for any other host.
// - The channel argument wins over the grpc_proxy/https_proxy/http_proxy
//   environment variables. But the no_grpc_proxy and no_proxy environment
//   variables still bypass the proxy for every host they match, by suffix
//   ("3.1" matches 127.0.3.1; "127.0.0.1,localhost" does not; CIDR ranges
//   are not understood by gRPC 1.51), and the channel argument
//   "grpc.enable_http_proxy" = 0 turns proxying off: keep both away from
//   cluster addresses. RelayStats::tunnels_opened shows whether a client
//   really went through its relay.
// - TLS runs end to end inside the tunnel; the relay never sees plaintext.
//
// Channels: a CONNECT to a name rather than a service address,
// "<pod>.<cluster>:<port>", is channel traffic. It passes only when a virtual
// link from the relay's cluster to exactly that endpoint is installed
// (PutVirtualLink; NetMA installs them through CODEF's control API), else
// 403; it is shaped like any traffic between the two clusters and ends at an
// echo that stands in for the receiving pod.
//
// Connection lifecycle: the relay answers "200 Connection established" after
// one emulated round trip (the TCP handshake to B). While the link is cut or
// either cluster partitioned, a new CONNECT stalls (no answer) until the link
// heals or the client gives up, and bytes of open connections are held, so
// calls fail by their deadline; healing releases held bytes and resumes both
// existing and new connections.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/codef/relay/link_table.h"
#include "tools/codef/relay/shaped_pipe.h"

namespace codeco::codef {

/// Tunables of a LinkEmulator; every default suits the CODEF emulator.
struct LinkEmulatorOptions {
  /// Seed of every loss draw (each connection direction derives its own).
  /// Default 1.
  uint64_t seed = 1;
  /// The shaping model's tunables.
  ShapingOptions shaping;
  /// Bytes one direction of a connection may hold before the relay stops
  /// reading from the sender (TCP backpressure). Default 4 MiB.
  int64_t max_buffered_bytes = 4 << 20;
  /// Largest single read from a socket, i.e. the largest shaped chunk.
  /// Default 16 KiB.
  int64_t read_chunk_bytes = 16 * 1024;
  /// Time a client has to send its CONNECT request. Default 10 s.
  absl::Duration handshake_timeout = absl::Seconds(10);
  /// Runs the connection threads under SCHED_FIFO (priority 10) so that a
  /// busy machine delays releases less; needs CAP_SYS_NICE and is skipped
  /// silently when refused. The threads only block, read and write, so they
  /// cannot monopolize a core. Default off.
  bool realtime_priority = false;
};

/// Counters of one cluster's relay, for tests and reports.
struct RelayStats {
  /// CONNECT requests accepted and tunnelled.
  int64_t tunnels_opened = 0;
  /// CONNECT requests refused (bad request, unknown or unreachable destination).
  int64_t requests_refused = 0;
  /// Connections currently open (including those still in the handshake).
  int64_t open_connections = 0;
  /// Channel tunnels opened (through an installed virtual link).
  int64_t channel_tunnels_opened = 0;
  /// Channel traffic refused for want of a virtual link.
  int64_t channels_refused = 0;
};

/// Relays and shapes the traffic between emulated clusters.
class LinkEmulator {
 public:
  /// An emulator with default options.
  LinkEmulator();
  /// An emulator with `options`.
  explicit LinkEmulator(const LinkEmulatorOptions& options);
  /// Shuts down (see Shutdown).
  ~LinkEmulator();
  LinkEmulator(const LinkEmulator&) = delete;
  LinkEmulator& operator=(const LinkEmulator&) = delete;

  /// Registers a cluster whose services listen on `service_ip` (e.g.
  /// "127.0.3.1") and starts its egress relay, an HTTP CONNECT proxy, on
  /// `relay_listen` ("127.0.3.1:0", IPv4 host:port); returns the bound relay
  /// address.
  absl::StatusOr<std::string> AddCluster(const std::string& name, const std::string& service_ip,
                                         const std::string& relay_listen);
  /// Sets the directed link `from` -> `to`; applies at once, also to open
  /// connections. A link never set is unshaped.
  absl::Status SetLink(const std::string& from, const std::string& to,
                       const LinkConditions& conditions);
  /// The conditions last set on `from` -> `to`.
  absl::StatusOr<LinkConditions> GetLink(const std::string& from, const std::string& to) const;
  /// Cuts (or restores) every link to and from `cluster`.
  absl::Status SetPartitioned(const std::string& cluster, bool partitioned);
  /// Installs a virtual link on the relays (the edge devices' rules):
  /// channel traffic from its source cluster to its endpoint passes, shaped
  /// by the link. See VirtualLinkRoute.
  absl::Status PutVirtualLink(const VirtualLinkRoute& route);
  /// Removes virtual link `id`; NOT_FOUND when it is not installed.
  absl::Status DeleteVirtualLink(const std::string& id);
  /// The installed virtual links, by id.
  std::map<std::string, VirtualLinkRoute> VirtualLinks() const;
  /// The relay address of `cluster`.
  absl::StatusOr<std::string> RelayAddress(const std::string& cluster) const;
  /// Counters of `cluster`'s relay.
  absl::StatusOr<RelayStats> Stats(const std::string& cluster) const;
  /// Stops every relay, closes every connection and joins every thread.
  /// Idempotent; afterwards AddCluster fails.
  void Shutdown();

 private:
  class Relay;
  // Tells every open connection that conditions changed.
  void WakeAll();

  const LinkEmulatorOptions options_;
  LinkTable links_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Relay>> relays_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> relay_addresses_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace codeco::codef
