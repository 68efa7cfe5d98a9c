#pragma once
// Secure connectivity (L2S-M-like), hub role: virtual links for inter-cluster
// channels. A virtual link is compiled into a controller intent and then into
// forwarding rules on the network edge devices (NEDs, "ned-<cluster>") at both
// ends — modelled, not programmed into real switches. Links are pre-created
// (rules at creation) or on demand (rules on first use). Each neighborhood is
// managed by one controller instance; when an instance goes down its
// neighborhoods, and their edge devices, re-associate with a live instance and
// the rules are re-installed there.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/clock.h"
#include "codeco/netma/v1/topology.pb.h"

namespace codeco::netma {

/// Storage port of virtual links; the store/ implementation sits on KvStore.
class VirtualLinkRepository {
 public:
  virtual ~VirtualLinkRepository() = default;
  /// The link with `id`, or nullopt.
  virtual absl::StatusOr<std::optional<codeco::netma::v1::VirtualLink>> Get(
      const std::string& id) const = 0;
  /// The id of the link created with `request_id`, or nullopt.
  virtual absl::StatusOr<std::optional<std::string>> FindByRequestId(
      const std::string& request_id) const = 0;
  /// Stores `link` (and, when not empty, remembers `request_id` for it) atomically.
  virtual absl::Status Put(const codeco::netma::v1::VirtualLink& link,
                           const std::string& request_id) = 0;
  /// Stores every link of `links` atomically.
  virtual absl::Status PutAll(const std::vector<codeco::netma::v1::VirtualLink>& links) = 0;
  /// Removes the link `id` and its request id atomically.
  virtual absl::Status Delete(const std::string& id) = 0;
  /// Up to `limit` links (0: all) with ids after `start_after`, by id.
  virtual absl::StatusOr<std::vector<codeco::netma::v1::VirtualLink>> List(
      const std::string& start_after, size_t limit) const = 0;
};

/// Port: the network edge devices the controller programs with a link's
/// forwarding rules (CODEF's relays in the testbed, through its control API).
/// Without one the rules are only modelled.
class EdgeDevices {
 public:
  virtual ~EdgeDevices() = default;
  /// Installs the forwarding state of `link` (its rules compiled) on its devices.
  virtual absl::Status Install(const codeco::netma::v1::VirtualLink& link) = 0;
  /// Removes the state of link `id` from the devices; OK when not installed.
  virtual absl::Status Remove(const std::string& id) = 0;
};

/// Filter and page of a listing.
struct VirtualLinkQuery {
  /// Page size; 0 means 100, at most 1000.
  int page_size = 0;
  /// Id of the last link of the previous page (empty: from the start).
  std::string page_token;
  /// Only this application (empty: any).
  std::string application;
  /// Only links touching this cluster (empty: any).
  std::string cluster;
};

/// One page of virtual links.
struct VirtualLinkPage {
  /// The links, by id.
  std::vector<codeco::netma::v1::VirtualLink> links;
  /// Token of the next page; empty on the last.
  std::string next_page_token;
};

/// What a directed inter-cluster link offers one service class, bits per
/// second, or nullopt when nothing is measured yet (then no bandwidth check).
using LinkCapacityFn = std::function<std::optional<int64_t>(
    const std::string& from, const std::string& to, codeco::common::v1::ServiceClass)>;

/// The virtual-link controller of the hub. Not thread-safe.
class VirtualLinkController {
 public:
  /// A controller storing links in `repository` (not owned), with controller
  /// instances `controllers` (all live at start).
  VirtualLinkController(VirtualLinkRepository& repository, const Clock& clock,
                        std::vector<std::string> controllers);

  /// Creates a link from `spec` (application, channel, clusters, endpoint,
  /// class, bounds, provisioning, neighborhood). Idempotent by `request_id`
  /// and by (application, channel, source, target): the same request returns
  /// the stored link; a different spec for an existing one is ALREADY_EXISTS.
  /// INVALID_ARGUMENT naming "virtual_link.<field>"; UNAVAILABLE with no live
  /// controller instance; RESOURCE_EXHAUSTED naming the link when the links
  /// of its class already hold so much of the link's capacity that
  /// min_bandwidth_bps does not fit (a link is never oversubscribed).
  absl::StatusOr<codeco::netma::v1::VirtualLink> Create(const codeco::netma::v1::VirtualLink& spec,
                                                        const std::string& request_id);
  /// Installs the rules of an on-demand link on first use (no-op when installed).
  absl::StatusOr<codeco::netma::v1::VirtualLink> Activate(const std::string& id);
  /// The link `id`; NOT_FOUND when absent.
  absl::StatusOr<codeco::netma::v1::VirtualLink> Get(const std::string& id) const;
  /// A page of links matching `query`.
  absl::StatusOr<VirtualLinkPage> List(const VirtualLinkQuery& query) const;
  /// Removes the link `id` and its rules; returns it in phase DELETING.
  absl::StatusOr<codeco::netma::v1::VirtualLink> Delete(const std::string& id);

  /// Where links' rules are installed (not owned; none by default: the
  /// rules are only modelled). Create and Activate fail (nothing stored) when
  /// the devices refuse; Delete keeps the link when they cannot remove it.
  void SetEdgeDevices(EdgeDevices* devices) { edge_devices_ = devices; }
  /// Installs every stored link that has rules on the edge devices again
  /// (after a restart of the controller or of the devices); the first error.
  absl::Status ReinstallAll();
  /// Where Create reads a link's capacity per class (none by default: no
  /// bandwidth check).
  void SetCapacity(LinkCapacityFn capacity) { capacity_ = std::move(capacity); }
  /// Bits per second of `service_class` the stored links from -> to hold.
  absl::StatusOr<int64_t> HeldBandwidth(const std::string& from, const std::string& to,
                                        codeco::common::v1::ServiceClass service_class) const;
  /// Sets reserved_bandwidth_bps of every capability of `topology`'s links
  /// to what the stored virtual links of that class hold on it.
  absl::Status AnnotateTopology(codeco::netma::v1::NetworkTopology& topology) const;

  /// Updates measured delay, throughput and phase (UP, DEGRADED, FAILED) of
  /// every installed link from measured `links`, probe by probe: the newest
  /// probe's delay (rtt_last_ns / 2) against max_delay_ns and the measured
  /// throughput against min_bandwidth_bps. A link over a bound is DEGRADED
  /// and keeps out_of_bounds_since, the measure time of the first probe of
  /// the run over it, until a probe is within bounds again (how long a
  /// channel has been out of QoS is read from it). Returns how many links
  /// changed.
  absl::StatusOr<int> ApplyMeasurements(const std::vector<codeco::netma::v1::LinkMetrics>& links);

  /// Marks controller instance `id` down: its neighborhoods and their edge
  /// devices re-associate with live instances and rules are re-installed.
  /// NOT_FOUND for an unknown instance; UNAVAILABLE when none is left (links
  /// then go FAILED).
  absl::Status MarkControllerDown(const std::string& id);
  /// Marks controller instance `id` live again (it takes new neighborhoods).
  absl::Status MarkControllerUp(const std::string& id);
  /// The controller instance managing `neighborhood` (empty when none yet).
  std::string ControllerOf(const std::string& neighborhood) const;
  /// The controller instance each edge device of `neighborhood` is associated with.
  std::map<std::string, std::string> DeviceAssociations(const std::string& neighborhood) const;

 private:
  absl::StatusOr<std::string> AssignController(const std::string& scope);
  void Install(codeco::netma::v1::VirtualLink& link) const;
  // Installs `link`'s rules on the edge devices, if any; the error names the link.
  absl::Status InstallOnDevices(const codeco::netma::v1::VirtualLink& link) const;
  // Bits per second the stored links hold, by "<from>-><to>" and class.
  absl::StatusOr<std::map<std::string, std::map<int, int64_t>>> HeldByLink() const;

  VirtualLinkRepository& repository_;
  const Clock& clock_;
  LinkCapacityFn capacity_;
  EdgeDevices* edge_devices_ = nullptr;
  std::map<std::string, bool> controllers_;               // instance -> live
  std::map<std::string, std::string> assignments_;        // neighborhood scope -> instance
  std::map<std::string, std::set<std::string>> devices_;  // neighborhood scope -> NEDs
};

/// The id a link gets: "vl-" and a hash of application, channel and clusters.
std::string VirtualLinkId(const codeco::netma::v1::VirtualLink& spec);

}  // namespace codeco::netma
