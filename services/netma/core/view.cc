#include "netma/core/view.h"

#include <set>

#include "codeco/common/status.h"
#include "google/protobuf/util/time_util.h"

namespace codeco::netma {

namespace {

// The RTT a link's delay cost uses: the robust path estimate when the
// measuring NetMA sent one, else (an older peer's summary) the EMA.
int64_t PathRttNs(const codeco::netma::v1::LinkMetrics& l) {
  if (l.path_rtt_ns() > 0 || l.local_overhead_ns() > 0) return l.path_rtt_ns();
  return l.rtt_ema_ns();
}

}  // namespace

using codeco::netma::v1::LinkMetrics;
using codeco::netma::v1::NetworkTopology;
using google::protobuf::util::TimeUtil;

NetworkView::NetworkView(const NetworkMonitor& monitor, const Federation& federation,
                         const ViewOptions& options, const Clock& clock)
    : monitor_(monitor), federation_(federation), options_(options), clock_(clock) {}

void NetworkView::SetEndpoints(const std::string& cluster, std::vector<std::string> endpoints) {
  endpoints_[cluster] = std::move(endpoints);
}

absl::StatusOr<std::vector<std::string>> NetworkView::Clusters(
    const std::string& neighborhood_id) const {
  std::set<std::string> clusters;
  if (!neighborhood_id.empty()) {
    ASSIGN_OR_RETURN(std::set<std::string> members, federation_.Members(neighborhood_id));
    clusters = std::move(members);
  } else {
    clusters.insert(monitor_.local_cluster());
    for (const Peer& peer : monitor_.peers()) clusters.insert(peer.cluster);
    for (const std::string& id : federation_.NeighborhoodIds()) {
      auto members = federation_.Members(id);
      if (members.ok()) clusters.insert(members->begin(), members->end());
    }
  }
  return std::vector<std::string>(clusters.begin(), clusters.end());
}

absl::StatusOr<std::vector<LinkMetrics>> NetworkView::Links(
    const std::string& neighborhood_id) const {
  ASSIGN_OR_RETURN(std::vector<std::string> cluster_list, Clusters(neighborhood_id));
  std::set<std::string> clusters(cluster_list.begin(), cluster_list.end());
  std::map<std::string, LinkMetrics> links;
  for (LinkMetrics& l : federation_.RemoteLinks(neighborhood_id)) {
    // The local cluster's own links are measured here; a peer's word about them never wins.
    if (l.source_cluster() == monitor_.local_cluster()) continue;
    links[l.link_id()] = std::move(l);
  }
  for (LinkMetrics& l : monitor_.Links()) links[l.link_id()] = std::move(l);
  std::vector<LinkMetrics> out;
  for (auto& [id, l] : links) {
    if (clusters.count(l.source_cluster()) && clusters.count(l.target_cluster())) {
      out.push_back(std::move(l));
    }
  }
  return out;
}

absl::StatusOr<NetworkTopology> NetworkView::Topology(const std::string& neighborhood_id) {
  ASSIGN_OR_RETURN(std::vector<std::string> clusters, Clusters(neighborhood_id));
  ASSIGN_OR_RETURN(std::vector<LinkMetrics> links, Links(neighborhood_id));
  NetworkTopology topology;
  for (const std::string& cluster : clusters) {
    auto* node = topology.add_nodes();
    node->set_id(cluster);
    node->set_type(codeco::netma::v1::NETWORK_NODE_TYPE_COMPUTE);
    node->set_cluster(cluster);
  }
  for (const LinkMetrics& l : links) {
    if (!l.has_measure_time() || l.sample_count() == 0) continue;
    auto* link = topology.add_links();
    link->set_id(l.link_id());
    link->set_source(l.source_cluster());
    link->set_target(l.target_cluster());
    *link->mutable_measure_time() = l.measure_time();
    link->set_stale(l.stale());
    link->set_failed(l.failed());
    // A down or never-reached link offers nothing to any class.
    if (l.failed() || l.rtt_ema_ns() == 0) continue;
    for (auto service_class : {codeco::common::v1::SERVICE_CLASS_BESTEFFORT,
                               codeco::common::v1::SERVICE_CLASS_ASSURED}) {
      auto* cap = link->add_capabilities();
      cap->set_service_class(service_class);
      double share =
          service_class == codeco::common::v1::SERVICE_CLASS_ASSURED ? options_.assured_share : 1;
      cap->set_bandwidth_bps(static_cast<int64_t>(static_cast<double>(l.throughput_bps()) * share));
      cap->set_latency_ns(PathRttNs(l) / 2);
      cap->set_loss_ratio(l.loss_ratio());
      cap->set_energy_joules_per_byte(l.energy_joules_per_byte());
    }
  }
  // The revision follows the content: hash everything but the timestamps.
  NetworkTopology content = topology;
  for (auto& link : *content.mutable_links()) link.clear_measure_time();
  std::string bytes;
  content.SerializeToString(&bytes);
  std::string tag = ContentTag(bytes);
  Revision& rev = topology_revisions_[neighborhood_id];
  if (rev.tag != tag) {
    rev.tag = tag;
    ++rev.revision;
  }
  topology.set_revision(rev.revision);
  *topology.mutable_measure_time() =
      TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  return topology;
}

absl::StatusOr<codeco::netma::v1::NetworkMap> NetworkView::NetworkMap(
    const std::string& neighborhood_id) const {
  ASSIGN_OR_RETURN(std::vector<std::string> clusters, Clusters(neighborhood_id));
  std::map<std::string, std::vector<std::string>> pids;
  for (const std::string& cluster : clusters) {
    auto it = endpoints_.find(cluster);
    pids[cluster] = it == endpoints_.end() ? std::vector<std::string>{} : it->second;
  }
  return BuildNetworkMap(pids);
}

absl::StatusOr<codeco::netma::v1::CostMap> NetworkView::CostMap(
    const codeco::netma::v1::GetCostMapRequest& request) const {
  ASSIGN_OR_RETURN(auto network_map, NetworkMap(request.neighborhood_id()));
  ASSIGN_OR_RETURN(std::vector<LinkMetrics> links, Links(request.neighborhood_id()));
  std::vector<LinkCost> costs;
  for (const LinkMetrics& l : links) {
    if (l.failed() || l.rtt_ema_ns() == 0) continue;  // no path (yet), no cost
    costs.push_back(LinkCost{l.source_cluster(), l.target_cluster(), PathRttNs(l) / 2,
                             l.throughput_bps(), l.loss_ratio(), l.energy_joules_per_byte()});
  }
  return BuildCostMap(network_map, costs, request.metric(), request.mode(),
                      {request.source_pids().begin(), request.source_pids().end()},
                      {request.destination_pids().begin(), request.destination_pids().end()});
}

}  // namespace codeco::netma
