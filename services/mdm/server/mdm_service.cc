#include "mdm/server/mdm_service.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"

namespace codeco::mdm {
namespace {

// Page tokens: what the next page starts at, behind a prefix that says
// which listing it belongs to.
constexpr char kOffsetToken[] = "offset:";
constexpr char kEntityToken[] = "after:";
constexpr char kTypeToken[] = "type:";
// A request_id, suffixed with "#<index>", becomes each event's event_id.
constexpr size_t kMaxRequestId = 200;

absl::StatusOr<std::string> TokenValue(const std::string& token, const char* prefix) {
  absl::string_view rest(token);
  if (!absl::ConsumePrefix(&rest, prefix)) {
    return InvalidFieldError("page_token", "is not a token of this listing");
  }
  return std::string(rest);
}

// Streams the log from an offset on, then each new event as it is appended.
class EventWatch final : public WatchStream<v1::WatchEventsResponse> {
 public:
  EventWatch(MetadataStore& store, std::atomic<int>& watchers, int max_watchers,
             const v1::WatchEventsRequest& request)
      : store_(store),
        watchers_(watchers),
        next_(std::max<int64_t>(1, request.from_offset())),
        types_(request.types().begin(), request.types().end()) {
    if (watchers_.fetch_add(1) >= max_watchers) {
      Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("at most ", max_watchers, " event watches at once")));
      return;
    }
    listener_ = store_.AddListener([this](int64_t) { Poke(); });
    Start();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    Batch batch;
    // A type filter may skip whole pages: read on until something matches
    // or the log's end.
    while (true) {
      ASSIGN_OR_RETURN(EventPage page, store_.ReadEvents(next_, 500, types_));
      next_ = page.next_offset;
      if (!page.events.empty()) {
        v1::WatchEventsResponse response;
        for (auto& e : page.events) *response.add_events() = std::move(e);
        batch.messages.push_back(std::move(response));
        return batch;
      }
      if (next_ >= page.end_offset) return batch;
    }
  }
  void Closed() override {
    if (listener_ != 0) store_.RemoveListener(listener_);
    watchers_.fetch_sub(1);
  }

  MetadataStore& store_;
  std::atomic<int>& watchers_;
  int64_t next_;
  const std::vector<std::string> types_;
  int listener_ = 0;
};

}  // namespace

MdmServiceImpl::MdmServiceImpl(std::shared_ptr<MetadataStore> store, int max_watchers)
    : store_(std::move(store)), max_watchers_(max_watchers), io_(2, 256) {}

grpc::ServerUnaryReactor* MdmServiceImpl::PublishEvents(grpc::CallbackServerContext* context,
                                                        const v1::PublishEventsRequest* request,
                                                        v1::PublishEventsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->request_id().size() > kMaxRequestId) {
      return InvalidFieldError("request_id",
                               absl::StrCat("must be at most ", kMaxRequestId, " bytes"));
    }
    std::vector<v1::MetadataEvent> events(request->events().begin(), request->events().end());
    if (!request->request_id().empty()) {
      // A repeated request stores nothing new: each event without an id of
      // its own gets one from the request's.
      for (size_t i = 0; i < events.size(); ++i) {
        if (events[i].event_id().empty()) {
          events[i].set_event_id(absl::StrCat(request->request_id(), "#", i));
        }
      }
    }
    ASSIGN_OR_RETURN(PublishResult result, store_->Publish(events));
    for (int64_t offset : result.offsets) response->add_offsets(offset);
    if (!result.offsets.empty()) {
      response->set_first_offset(result.offsets.front());
      response->set_last_offset(*std::max_element(result.offsets.begin(), result.offsets.end()));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MdmServiceImpl::ReadEvents(grpc::CallbackServerContext* context,
                                                     const v1::ReadEventsRequest* request,
                                                     v1::ReadEventsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
    int64_t from = request->from_offset();
    if (!request->page_token().empty()) {
      ASSIGN_OR_RETURN(std::string value, TokenValue(request->page_token(), kOffsetToken));
      if (!absl::SimpleAtoi(value, &from) || from < 1) {
        return InvalidFieldError("page_token", "is not a token of this listing");
      }
    }
    const std::vector<std::string> types(request->types().begin(), request->types().end());
    ASSIGN_OR_RETURN(EventPage page,
                     store_->ReadEvents(from, static_cast<size_t>(request->page_size()), types));
    for (auto& e : page.events) *response->add_events() = std::move(e);
    response->set_end_offset(page.end_offset);
    if (page.next_offset < page.end_offset) {
      response->set_next_page_token(absl::StrCat(kOffsetToken, page.next_offset));
    }
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::WatchEventsResponse>* MdmServiceImpl::WatchEvents(
    grpc::CallbackServerContext* /*context*/, const v1::WatchEventsRequest* request) {
  return new EventWatch(*store_, watchers_, max_watchers_, *request);
}

grpc::ServerUnaryReactor* MdmServiceImpl::GetEntity(grpc::CallbackServerContext* context,
                                                    const v1::GetEntityRequest* request,
                                                    v1::GetEntityResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->id().empty()) return InvalidFieldError("id", "is required");
    ASSIGN_OR_RETURN(*response->mutable_entity(), store_->GetEntity(request->id()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MdmServiceImpl::ListEntities(grpc::CallbackServerContext* context,
                                                       const v1::ListEntitiesRequest* request,
                                                       v1::ListEntitiesResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
    std::string after;
    if (!request->page_token().empty()) {
      ASSIGN_OR_RETURN(after, TokenValue(request->page_token(), kEntityToken));
    }
    EntityFilter filter{.type = request->type(), .cluster = request->cluster()};
    filter.where = request->where();
    ASSIGN_OR_RETURN(
        EntityPage page,
        store_->ListEntities(filter, after, static_cast<size_t>(request->page_size())));
    for (auto& e : page.entities) *response->add_entities() = std::move(e);
    if (!page.next_after.empty()) {
      response->set_next_page_token(absl::StrCat(kEntityToken, page.next_after));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MdmServiceImpl::QueryGraph(grpc::CallbackServerContext* context,
                                                     const v1::QueryGraphRequest* request,
                                                     v1::QueryGraphResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->entity_id().empty()) return InvalidFieldError("entity_id", "is required");
    if (request->max_entities() < 0) {
      return InvalidFieldError("max_entities", "must not be negative");
    }
    GraphQuery query;
    query.entity_id = request->entity_id();
    query.depth = request->depth();
    query.relationship_types.assign(request->relationship_types().begin(),
                                    request->relationship_types().end());
    switch (request->direction()) {
      case v1::TRAVERSAL_DIRECTION_OUTGOING:
        query.direction = Direction::kOutgoing;
        break;
      case v1::TRAVERSAL_DIRECTION_INCOMING:
        query.direction = Direction::kIncoming;
        break;
      case v1::TRAVERSAL_DIRECTION_UNSPECIFIED:
      case v1::TRAVERSAL_DIRECTION_BOTH:
        query.direction = Direction::kBoth;
        break;
      default:
        return InvalidFieldError("direction", "is not a known direction");
    }
    query.max_entities = static_cast<size_t>(request->max_entities());
    ASSIGN_OR_RETURN(GraphResult result, store_->Query(query));
    for (auto& e : result.entities) *response->add_entities() = std::move(e);
    for (auto& r : result.relationships) *response->add_relationships() = std::move(r);
    response->set_truncated(result.truncated);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MdmServiceImpl::RegisterType(grpc::CallbackServerContext* context,
                                                       const v1::RegisterTypeRequest* request,
                                                       v1::RegisterTypeResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (!request->has_type_definition()) {
      return InvalidFieldError("type_definition", "is required");
    }
    // request_id needs no record: registering the same definition again
    // changes nothing.
    ASSIGN_OR_RETURN(*response->mutable_type_definition(),
                     store_->RegisterType(request->type_definition()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MdmServiceImpl::ListTypes(grpc::CallbackServerContext* context,
                                                    const v1::ListTypesRequest* request,
                                                    v1::ListTypesResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
    std::string after;
    if (!request->page_token().empty()) {
      ASSIGN_OR_RETURN(after, TokenValue(request->page_token(), kTypeToken));
    }
    const size_t limit =
        std::clamp<size_t>(request->page_size() == 0 ? 100 : request->page_size(), 1, 1000);
    for (v1::TypeDefinition& t : store_->ListTypes()) {
      if (t.name() <= after && !after.empty()) continue;
      if (request->kind() != v1::TYPE_KIND_UNSPECIFIED && t.kind() != request->kind()) continue;
      if (static_cast<size_t>(response->types_size()) == limit) {
        response->set_next_page_token(
            absl::StrCat(kTypeToken, response->types(response->types_size() - 1).name()));
        break;
      }
      *response->add_types() = std::move(t);
    }
    return absl::OkStatus();
  });
}

}  // namespace codeco::mdm
