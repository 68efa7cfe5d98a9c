#pragma once
// Which codeco processes a federation runs, where, and with which flags: the
// pure part of `codecoctl up`, testable without starting anything.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scenario.h"

namespace codeco::ctl {

/// One cluster of an emulated federation, as CODEF reports it.
struct ClusterEndpoint {
  /// Cluster name (a DNS label).
  std::string name;
  /// True for the hub cluster.
  bool is_hub = false;
  /// Loopback IP its services listen on (127.0.N.1).
  std::string service_ip;
  /// Its local management system (codeco.lms.v1) address.
  std::string lms_address;
  /// Its egress relay (HTTP CONNECT proxy) address; empty when none.
  std::string relay_address;
  /// Where its NetMA will listen (host:port, chosen before anything starts so
  /// every NetMA can be told its peers); empty: an ephemeral port and no peers.
  std::string netma_address;
  /// Where its SWM will listen (host:port, chosen before anything starts so
  /// the hub's SWM can drive every managed cluster's SWM); empty: an
  /// ephemeral port, and the hub drives the cluster through its LMS.
  std::string swm_address;
  /// Where a managed cluster's ACM will listen (host:port, chosen before it
  /// starts so its agent can register it and the hub push it its copies);
  /// empty: an ephemeral port, and the cluster only pulls them.
  std::string acm_address;
  /// Where a managed cluster's checkpointer will listen (host:port, chosen
  /// before it starts so the others can restore there); empty: an ephemeral
  /// port, and no migration can target the cluster.
  std::string checkpointer_address;
  /// Where a managed cluster's PDLC will listen (host:port, chosen before it
  /// starts so its ACM advertises it and SWM follows its recommendations);
  /// empty: an ephemeral port, and placements go without its advice.
  std::string pdlc_address;
  /// The registry checkpoint images go to ("host:port", plain HTTP on
  /// loopback); empty: requests must name a repository.
  std::string registry;
  /// Its parent in a cluster tree (the scenario's `parent`); empty: none.
  std::string parent;
};

/// How every service process authenticates.
struct SecuritySettings {
  /// Plaintext on loopback instead of mTLS.
  bool insecure = false;
  /// Directory laid out by scripts/dev-ca.sh: ca.crt and <cluster>/<svc>.{crt,key}.
  std::string certs_dir;
};

/// One process to start.
struct ProcessSpec {
  /// "<cluster>/<service>", unique in a plan.
  std::string name;
  /// Cluster name.
  std::string cluster;
  /// Service name ("acm", ...).
  std::string service;
  /// True for the hub's services.
  bool hub = false;
  /// Binary name (in the bin directory), e.g. "codeco-acm".
  std::string binary;
  /// Arguments after the binary.
  std::vector<std::string> args;
};

/// Makes `spec` listen on `address` instead of an ephemeral port.
void SetListen(const std::string& address, ProcessSpec& spec);

/// The services the hub runs, in start order.
const std::vector<std::string>& HubServices();
/// The services every managed cluster runs, in start order.
const std::vector<std::string>& ManagedClusterServices();

/// The processes of the hub cluster of `clusters` (the one with is_hub).
/// Data lives under `data_dir/<cluster>/<service>`. Every cluster's NetMA
/// probes every other cluster's NetMA (one neighborhood, "federation"), the
/// hub's SWM plans with what the hub's NetMA measured, and it solves and
/// reserves in each managed cluster through that cluster's SWM. With
/// `pdlc_auction` the hub's SWM runs the neighborhood auction for each
/// placement (the managed clusters' PDLCs always know each other as bidders).
std::vector<ProcessSpec> PlanHub(const std::vector<ClusterEndpoint>& clusters,
                                 const SecuritySettings& security, const std::string& data_dir,
                                 bool pdlc_auction = false);
/// The processes of every non-hub cluster in `clusters`. Their services know
/// the hub ACM as `hub_acm`, except that a cluster's ACM agent registers and
/// heartbeats with ReportingAcm(): its parent's ACM in a layered federation.
std::vector<ProcessSpec> PlanManagedClusters(
    const std::vector<ClusterEndpoint>& clusters, const std::string& hub_acm,
    const SecuritySettings& security, const std::string& data_dir,
    codef::FederationMode mode = codef::FederationMode::kFlat);

/// The ACM `cluster`'s agent registers and heartbeats with: in a layered
/// federation, when its parent is a managed cluster, that parent's
/// acm_address; otherwise (flat, no parent, the hub as parent) `hub_acm`.
std::string ReportingAcm(const ClusterEndpoint& cluster,
                         const std::vector<ClusterEndpoint>& clusters, const std::string& hub_acm,
                         codef::FederationMode mode);

/// In a layered federation, every parent a cluster names is a cluster of
/// `clusters`, and a managed parent has a fixed acm_address (its children
/// are started with it); FAILED_PRECONDITION naming the first that is not.
/// Always OK in a flat one.
absl::Status CheckReportingTree(const std::vector<ClusterEndpoint>& clusters,
                                codef::FederationMode mode);

}  // namespace codeco::ctl
