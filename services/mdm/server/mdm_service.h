#pragma once
// MdmService over gRPC (docs/mdm.md): translates requests to the
// MetadataStore and its answers back. The store does the checking; this
// layer adds page tokens, the request_id of a publish and the watch stream.

#include <atomic>
#include <memory>

#include "codeco/common/executor.h"
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"
#include "mdm/core/metadata_store.h"

namespace codeco::mdm {

/// Serves one MetadataStore.
class MdmServiceImpl final : public v1::MdmService::CallbackService {
 public:
  /// Most WatchEvents streams open at once; more are answered RESOURCE_EXHAUSTED.
  static constexpr int kDefaultMaxWatchers = 256;

  /// Serves `store` (shared with the connectors that publish into it).
  explicit MdmServiceImpl(std::shared_ptr<MetadataStore> store,
                          int max_watchers = kDefaultMaxWatchers);

  grpc::ServerUnaryReactor* PublishEvents(grpc::CallbackServerContext* context,
                                          const v1::PublishEventsRequest* request,
                                          v1::PublishEventsResponse* response) override;
  grpc::ServerUnaryReactor* ReadEvents(grpc::CallbackServerContext* context,
                                       const v1::ReadEventsRequest* request,
                                       v1::ReadEventsResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchEventsResponse>* WatchEvents(
      grpc::CallbackServerContext* context, const v1::WatchEventsRequest* request) override;
  grpc::ServerUnaryReactor* GetEntity(grpc::CallbackServerContext* context,
                                      const v1::GetEntityRequest* request,
                                      v1::GetEntityResponse* response) override;
  grpc::ServerUnaryReactor* ListEntities(grpc::CallbackServerContext* context,
                                         const v1::ListEntitiesRequest* request,
                                         v1::ListEntitiesResponse* response) override;
  grpc::ServerUnaryReactor* QueryGraph(grpc::CallbackServerContext* context,
                                       const v1::QueryGraphRequest* request,
                                       v1::QueryGraphResponse* response) override;
  grpc::ServerUnaryReactor* RegisterType(grpc::CallbackServerContext* context,
                                         const v1::RegisterTypeRequest* request,
                                         v1::RegisterTypeResponse* response) override;
  grpc::ServerUnaryReactor* ListTypes(grpc::CallbackServerContext* context,
                                      const v1::ListTypesRequest* request,
                                      v1::ListTypesResponse* response) override;

 private:
  std::shared_ptr<MetadataStore> store_;
  const int max_watchers_;
  std::atomic<int> watchers_{0};
  BoundedExecutor io_;
};

}  // namespace codeco::mdm
