#pragma once
// The link emulator's table of clusters and directed links: which loopback
// address each cluster's services listen on, the conditions of every directed
// link, and which clusters are partitioned away. Pure logic, no sockets;
// thread-safe, because every relayed connection reads it on each chunk.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace codeco::codef {

/// The conditions of one directed link between two clusters.
struct LinkConditions {
  /// Delay added to every byte sent over the link, in nanoseconds.
  int64_t one_way_latency_ns = 0;
  /// Bandwidth cap in bits per second; 0 = unlimited.
  int64_t bandwidth_bps = 0;
  /// Ratio 0..1 of chunks lost once (and retransmitted after a timeout).
  double loss = 0;
  /// The link delivers nothing while cut.
  bool cut = false;
};

/// Checks the ranges of `conditions`; INVALID_ARGUMENT naming the field.
absl::Status ValidateLinkConditions(const LinkConditions& conditions);

/// What shaping one direction of a connection needs to know at one moment.
struct PathState {
  /// The forward link's conditions; `cut` is also set when either end is
  /// partitioned.
  LinkConditions forward;
  /// The reverse link's one-way latency (for the round trip that sets the
  /// retransmission timeout).
  int64_t reverse_latency_ns = 0;
};

/// A virtual link as the relays enforce it: channel traffic from
/// `source_cluster` to the channel endpoint `target_endpoint`
/// ("<pod>.<cluster>:<port>") in `target_cluster` passes the source's relay;
/// channel traffic without one is refused. NetMA installs and removes them
/// (the edge devices' forwarding rules), through CODEF's control API.
struct VirtualLinkRoute {
  std::string id;               ///< NetMA's virtual link id.
  std::string source_cluster;   ///< Sending cluster.
  std::string target_cluster;   ///< Receiving cluster.
  std::string target_endpoint;  ///< "host:port" of the receiving endpoint.
};

/// Clusters, directed links and partitions. A link that was never set is
/// unshaped (default LinkConditions); traffic inside one cluster is never
/// shaped.
class LinkTable {
 public:
  /// Registers `name` whose services listen on the IPv4 address `service_ip`.
  /// ALREADY_EXISTS if the name or the address is taken.
  absl::Status AddCluster(const std::string& name, const std::string& service_ip);
  /// True when `name` is registered.
  bool HasCluster(const std::string& name) const;
  /// The service address of cluster `name`, if registered.
  std::optional<std::string> ServiceIp(const std::string& name) const;
  /// The cluster whose services listen on `ip`, if any.
  std::optional<std::string> ClusterForIp(const std::string& ip) const;
  /// Sets the directed link `from` -> `to` (distinct registered clusters).
  absl::Status SetLink(const std::string& from, const std::string& to,
                       const LinkConditions& conditions);
  /// The conditions last set on `from` -> `to` (partitions not applied).
  absl::StatusOr<LinkConditions> GetLink(const std::string& from, const std::string& to) const;
  /// Cuts (or restores) every link to and from `cluster`.
  absl::Status SetPartitioned(const std::string& cluster, bool partitioned);
  /// Whether `cluster` is partitioned away.
  absl::StatusOr<bool> IsPartitioned(const std::string& cluster) const;
  /// The effective state of `from` -> `to` now: link conditions with
  /// partitions applied, plus the reverse latency.
  absl::StatusOr<PathState> Path(const std::string& from, const std::string& to) const;

  /// Installs (or replaces, by id) a virtual link between two distinct
  /// registered clusters; INVALID_ARGUMENT naming the field.
  absl::Status PutVirtualLink(const VirtualLinkRoute& route);
  /// Removes virtual link `id`; NOT_FOUND when it is not installed.
  absl::Status DeleteVirtualLink(const std::string& id);
  /// The cluster a channel endpoint `host_port` belongs to when a virtual
  /// link from `source` to it is installed; nullopt otherwise.
  std::optional<std::string> ChannelDestination(const std::string& source,
                                                const std::string& host_port) const;
  /// The installed virtual links, by id.
  std::map<std::string, VirtualLinkRoute> VirtualLinks() const;

 private:
  absl::Status CheckPair(const std::string& from, const std::string& to) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  struct Cluster {
    std::string service_ip;
    bool partitioned = false;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Cluster> clusters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> cluster_by_ip_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, LinkConditions> links_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, VirtualLinkRoute> virtual_links_ ABSL_GUARDED_BY(mu_);  // by id
};

}  // namespace codeco::codef
