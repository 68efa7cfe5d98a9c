#include "codeco/common/authz.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/logging.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/security/auth_context.h"

namespace codeco {
namespace {

// absl::StrCat takes absl::string_view, which is not std::string_view in the
// installed Abseil.
absl::string_view A(std::string_view v) { return absl::string_view(v.data(), v.size()); }

std::string Describe(const SpiffeIdentity& identity) {
  return SpiffeId(identity.cluster, identity.service);
}

bool Admits(const Principal& p, const AuthzServer& server, const SpiffeIdentity& caller) {
  CallerKind kind = ClassifyCaller(caller, server.hub_cluster);
  auto service_ok = [&] { return p.service.empty() || p.service == caller.service; };
  switch (p.kind) {
    case Principal::Kind::kOperator:
      return kind == CallerKind::kOperator;
    case Principal::Kind::kHub:
      return kind == CallerKind::kHub && service_ok();
    case Principal::Kind::kMember:
      return kind == CallerKind::kMember && service_ok();
    case Principal::Kind::kLocal:
      return kind != CallerKind::kOperator && caller.cluster == server.cluster && service_ok();
    case Principal::Kind::kAnyPeer:
      return true;
  }
  return false;
}

AuthzPolicy BuildFederationPolicy() {
  const Principal op = Operator();
  const Principal hub = HubService();
  const Principal any = AnyPeer();
  // Readers of a service's state: the operator and the hub's services.
  const std::vector<Principal> readers = {op, hub};
  AuthzPolicy p;
  auto add = [&p](const std::string& service, std::initializer_list<const char*> methods,
                  const std::vector<Principal>& who) {
    for (const char* m : methods) p[absl::StrCat("/", service, "/", m)] = who;
  };

  // Health and reflection: anyone in the federation (probes, grpcurl).
  add("grpc.health.v1.Health", {"Check", "Watch"}, {any});
  add("grpc.reflection.v1alpha.ServerReflection", {"ServerReflectionInfo"}, {any});
  add("grpc.reflection.v1.ServerReflection", {"ServerReflectionInfo"}, {any});

  // ACM. User-facing writes: the operator only.
  const std::string acm = "codeco.acm.v1.AcmService";
  add(acm, {"RollbackApplication", "UnregisterCluster"}, {op});
  // Missions of a cluster tree: authored by the operator at the root; read at any ACM.
  add(acm, {"ApplyMission", "DeleteMission"}, {op});
  add(acm, {"GetMission", "ListMissions"}, readers);
  // The CodecoApp shim (codeco-kubeapps) forwards what users apply with kubectl.
  add(acm, {"ApplyApplication", "DeleteApplication"}, {op, HubService("kubeapps")});
  add(acm,
      {"ListApplications", "WatchApplication", "ListApplicationRevisions", "ListClusters",
       "GetOperation", "ListOperations", "WatchOperation"},
      readers);
  // A member's agent reads the applications of its neighborhoods (bound in the handler).
  add(acm, {"GetApplication"}, {op, hub, MemberService("acm")});
  // Multi-cluster service names: the operator, the hub's services, and any
  // service of a member in the application's neighborhood (bound in the
  // handler), which resolves its peers.
  add(acm, {"ResolveService"}, {op, hub, MemberService()});
  // A cluster's agent speaks for its own cluster (bound in the handler).
  add(acm, {"RegisterCluster", "Heartbeat"}, {MemberService("acm")});
  add(acm, {"GetCluster"}, {op, hub, MemberService("acm")});
  // Neighborhoods: members read their own (bound in the handler).
  add(acm, {"GetNeighborhood", "ListNeighborhoods"}, {op, hub, MemberService()});
  // Served by a member's ACM, pushed by the hub's.
  add(acm, {"PushNeighborhood", "PushAssignment"}, {HubService("acm")});

  // SWM.
  const std::string swm = "codeco.swm.v1.SwmService";
  add(swm, {"PlaceApplication", "ReleaseApplication"}, {HubService("acm")});
  add(swm,
      {"GetAssignmentPlan", "ListAssignmentPlans", "GetMigration", "ListMigrations",
       "ListStateBackups", "GetOperation", "ListOperations", "WatchOperation", "WatchChannels"},
      readers);
  // The hub ACM runs a job's next pod in an ended pod's slot.
  add(swm, {"MigrateWorkload"}, {op, HubService("swm"), HubService("acm")});
  // A member's L2 solver and reservations take the hub SWM only.
  // Each of their calls tells the member's swm that the hub answers, so
  // the hub is their only caller (the local decisions included).
  add(swm,
      {"SolveCluster", "GetClusterView", "WatchClusterView", "Reserve", "Commit", "Release",
       "ListLocalDecisions", "SettleLocalDecisions"},
      {HubService("swm")});

  // NetMA.
  const std::string netma = "codeco.netma.v1.NetmaService";
  // Neighborhood-scoped reads: members of the neighborhood (bound in the handler).
  add(netma, {"GetNetworkTopology", "GetNetworkMap", "GetCostMap"}, {op, hub, MemberService()});
  add(netma, {"ListLinks", "GetVirtualLink", "ListVirtualLinks", "GetOperation"}, readers);
  add(netma, {"CreateVirtualLink", "DeleteVirtualLink"}, {op, HubService("swm")});
  // The NetMA mesh: peers probe and exchange summaries.
  add(netma, {"ExchangeSummary", "ProbeBulk"}, {HubService("netma"), MemberService("netma")});

  // PDLC (managed clusters).
  const std::string pdlc = "codeco.pdlc.v1.PdlcService";
  add(pdlc, {"IngestMetrics"}, {LocalService()});
  add(pdlc, {"GetRecommendation", "ListForecasts", "WatchRecommendations"},
      {op, HubService("swm"), LocalService("swm")});
  add(pdlc, {"RunAuction"}, {HubService("swm")});
  add(pdlc, {"RequestBid"}, {MemberService("pdlc")});
  add(pdlc, {"GetOperation"}, {op, hub, LocalService()});
  // Federated training, served by a neighborhood's aggregator PDLC: peers act
  // only as themselves (bound in the handler: the caller must be
  // "<peer_id>/pdlc"); the operator and the hub read rounds and models.
  const std::string federated = "codeco.pdlc.v1.FederatedLearningService";
  add(federated, {"JoinRound", "SubmitMaskedUpdate", "RevealSeeds"}, {MemberService("pdlc")});
  add(federated, {"GetRound", "GetGlobalModel"}, {op, hub, MemberService("pdlc")});

  // MDM: connectors of every cluster publish; the operator, the hub and PDLCs read.
  const std::string mdm = "codeco.mdm.v1.MdmService";
  add(mdm, {"PublishEvents"}, {hub, MemberService()});
  add(mdm, {"ReadEvents", "WatchEvents", "GetEntity", "ListEntities", "QueryGraph"},
      {op, hub, MemberService("pdlc")});
  add(mdm, {"RegisterType"}, {op});
  add(mdm, {"ListTypes"}, {op, hub, MemberService()});

  // Checkpointer (managed clusters): SWM and the operator drive checkpoints
  // and migrations; a migration's source checkpointer restores at the target
  // cluster's and follows that operation.
  const std::string checkpointer = "codeco.checkpointer.v1.CheckpointerService";
  add(checkpointer, {"CreateCheckpoint", "DeleteCheckpoint", "MigrateContainer"},
      {op, HubService("swm"), LocalService("swm")});
  add(checkpointer, {"RestoreCheckpoint"},
      {op, HubService("swm"), LocalService("swm"), MemberService("checkpointer")});
  add(checkpointer, {"GetOperation", "WatchOperation"},
      {op, hub, LocalService("swm"), MemberService("checkpointer")});
  add(checkpointer, {"GetCheckpoint", "ListCheckpoints"}, {op, hub, LocalService("swm")});

  // LMS (a cluster's local management system, when served behind mTLS): that
  // cluster's own services and the operator.
  add("codeco.lms.v1.LmsService",
      {"ListNodes", "GetNode", "WatchNodes", "CreatePod", "GetPod", "ListPods", "DeletePod",
       "WatchPods", "GetNodeUsage", "CheckpointContainer", "RestoreContainer"},
      {op, LocalService()});

  // CODEF's control API (a testbed adapter): faults are the operator's; the
  // directory reads are open to the federation.
  const std::string codef = "codeco.codef.v1.CodefService";
  add(codef, {"ListClusters", "GetLinkConditions"}, {any});
  add(codef,
      {"SetLinkConditions", "ResetLinkConditions", "FailNode", "RecoverNode", "PartitionCluster",
       "HealCluster", "CutHub", "HealHub", "SetPodLoad", "EndPod", "SetClusterLoad", "SetNodeLoad"},
      {op});
  // The edge devices' rules: NetMA (the SDN controller) and the operator.
  add(codef, {"InstallVirtualLink", "RemoveVirtualLink"}, {op, HubService("netma")});
  return p;
}

class AuthzProcessor final : public grpc::AuthMetadataProcessor {
 public:
  AuthzProcessor(const AuthzPolicy& policy, AuthzServer server)
      : policy_(policy), server_(std::move(server)) {}

  // The decision is a map lookup: no need for gRPC's thread pool.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
    std::string method = "(no :path)";
    if (auto it = auth_metadata.find(":path"); it != auth_metadata.end()) {
      method.assign(it->second.data(), it->second.size());
    }
    absl::StatusOr<SpiffeIdentity> caller = PeerIdentity(*context);
    if (!caller.ok()) {
      log::Warn("call refused",
                {{"method", method}, {"error", std::string(caller.status().message())}});
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          absl::StrCat(A(method), ": ", caller.status().message()));
    }
    absl::Status decision = Authorize(policy_, server_, method, *caller);
    if (!decision.ok()) {
      log::Warn("permission denied", {{"method", method}, {"caller", Describe(*caller)}});
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, std::string(decision.message()));
    }
    return grpc::Status::OK;
  }

 private:
  const AuthzPolicy& policy_;
  const AuthzServer server_;
};

}  // namespace

Principal Operator() { return {Principal::Kind::kOperator, ""}; }
Principal HubService(std::string service) { return {Principal::Kind::kHub, std::move(service)}; }
Principal MemberService(std::string service) {
  return {Principal::Kind::kMember, std::move(service)};
}
Principal LocalService(std::string service) {
  return {Principal::Kind::kLocal, std::move(service)};
}
Principal AnyPeer() { return {Principal::Kind::kAnyPeer, ""}; }

const AuthzPolicy& FederationAuthzPolicy() {
  static const AuthzPolicy* policy = new AuthzPolicy(BuildFederationPolicy());
  return *policy;
}

const char* CallerKindName(CallerKind kind) {
  switch (kind) {
    case CallerKind::kOperator:
      return "operator";
    case CallerKind::kHub:
      return "hub";
    case CallerKind::kMember:
      return "member";
  }
  return "member";
}

CallerKind ClassifyCaller(const SpiffeIdentity& identity, std::string_view hub_cluster) {
  if (identity.cluster != hub_cluster) return CallerKind::kMember;
  return identity.service == kOperatorService ? CallerKind::kOperator : CallerKind::kHub;
}

absl::Status Authorize(const AuthzPolicy& policy, const AuthzServer& server,
                       std::string_view method, const SpiffeIdentity& caller) {
  auto it = policy.find(method);
  if (it == policy.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat(A(method), ": no caller may call it (", Describe(caller), " asked)"));
  }
  for (const Principal& p : it->second) {
    if (Admits(p, server, caller)) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(A(method), ": ", Describe(caller), " (",
                   CallerKindName(ClassifyCaller(caller, server.hub_cluster)), " of hub ",
                   server.hub_cluster, ") may not call it"));
}

std::vector<std::string> MethodsWithoutPolicy(const AuthzPolicy& policy,
                                              const std::vector<std::string>& service_names) {
  std::vector<std::string> out;
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& name : service_names) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(name);
    if (service == nullptr) {
      out.push_back(name);
      continue;
    }
    for (int i = 0; i < service->method_count(); ++i) {
      std::string method = absl::StrCat("/", name, "/", service->method(i)->name());
      if (policy.find(method) == policy.end()) out.push_back(method);
    }
  }
  return out;
}

std::shared_ptr<grpc::AuthMetadataProcessor> MakeAuthzProcessor(const AuthzPolicy& policy,
                                                                AuthzServer server) {
  return std::make_shared<AuthzProcessor>(policy, std::move(server));
}

std::string Caller::Describe() const {
  return plaintext ? "plaintext caller" : codeco::Describe(identity);
}

absl::StatusOr<Caller> CallerOf(const grpc::ServerContextBase& context,
                                std::string_view hub_cluster) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  Caller caller;
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    caller.plaintext = true;
    return caller;
  }
  absl::StatusOr<SpiffeIdentity> identity = PeerIdentity(*auth);
  if (!identity.ok()) {
    return absl::UnauthenticatedError(identity.status().message());
  }
  if (hub_cluster.empty()) {
    return absl::PermissionDeniedError(
        "the server does not know the hub cluster (federation.hub_cluster): no caller is trusted");
  }
  caller.identity = *identity;
  caller.kind = ClassifyCaller(caller.identity, hub_cluster);
  return caller;
}

absl::Status RequireOwnCluster(const grpc::ServerContextBase& context, std::string_view hub_cluster,
                               std::string_view method, std::string_view field,
                               std::string_view cluster) {
  absl::StatusOr<Caller> caller = CallerOf(context, hub_cluster);
  if (!caller.ok()) return caller.status();
  if (caller->plaintext || caller->kind != CallerKind::kMember ||
      caller->identity.cluster == cluster) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(A(method), ": ", caller->Describe(), " may speak only for its own cluster ",
                   caller->identity.cluster, ", but ", A(field), " is \"", A(cluster), "\""));
}

absl::Status RequireNeighborhoodMember(const grpc::ServerContextBase& context,
                                       std::string_view hub_cluster, std::string_view method,
                                       std::string_view neighborhood,
                                       const std::set<std::string>& members) {
  absl::StatusOr<Caller> caller = CallerOf(context, hub_cluster);
  if (!caller.ok()) return caller.status();
  if (caller->plaintext || caller->kind != CallerKind::kMember ||
      members.count(caller->identity.cluster)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(A(method), ": ", caller->Describe(),
                                                  " is not a member of neighborhood \"",
                                                  A(neighborhood), "\""));
}

absl::Status RequireHubOrOperator(const grpc::ServerContextBase& context,
                                  std::string_view hub_cluster, std::string_view method,
                                  std::string_view field) {
  absl::StatusOr<Caller> caller = CallerOf(context, hub_cluster);
  if (!caller.ok()) return caller.status();
  if (caller->plaintext || caller->kind != CallerKind::kMember) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      A(method), ": ", caller->Describe(),
      " is a managed cluster's service: it reads one neighborhood at a time (set ", A(field), ")"));
}

}  // namespace codeco
