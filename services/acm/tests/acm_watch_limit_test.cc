// WatchApplication past the server's watcher cap is RESOURCE_EXHAUSTED, and a
// closed watch frees its place.
#include <catch2/catch.hpp>
#include <memory>

#include "acm/server/acm_service.h"
#include "acm/store/kv_application_store.h"
#include "acm_test_util.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "grpcpp/create_channel.h"

namespace codeco::acm {
namespace {

using testing::In;
using testing::SmallCam;

struct Watch {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WatchApplicationResponse>> reader;
  Watch(v1::AcmService::Stub& stub) {
    context.set_deadline(In(absl::Seconds(30)));
    reader = stub.WatchApplication(&context, v1::WatchApplicationRequest());
  }
  // True once the first event (the current state) arrived: the server holds the watch.
  bool Started() {
    v1::WatchApplicationResponse event;
    return reader->Read(&event);
  }
};

TEST_CASE("watches past the cap are RESOURCE_EXHAUSTED until one closes") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore([] { return AcmServiceColumnFamilies(); }());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  AcmServiceOptions service_options;
  service_options.max_watchers = 2;
  std::unique_ptr<AcmServiceImpl> service = NewAcmService(*kv, clock, service_options);
  GrpcServerOptions options;
  options.service = "acm";
  options.insecure = true;
  options.services = {service.get()};
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  auto stub = v1::AcmService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("web"));
    v1::ApplyApplicationResponse response;
    REQUIRE(stub->ApplyApplication(&context, request, &response).ok());
  }

  auto first = std::make_unique<Watch>(*stub);
  REQUIRE(first->Started());
  Watch second(*stub);
  REQUIRE(second.Started());
  {
    Watch third(*stub);
    REQUIRE_FALSE(third.Started());
    grpc::Status status = third.reader->Finish();
    REQUIRE(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    REQUIRE(status.error_message().find("2 open watches") != std::string::npos);
  }
  first->context.TryCancel();
  first->reader->Finish();
  first.reset();
  // The cancelled watch is uncounted when the server is done with it; each
  // try is a round trip, bounded by a deadline rather than timed.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  bool started = false;
  while (!started && absl::Now() < deadline) {
    Watch again(*stub);
    started = again.Started();
    if (started) again.context.TryCancel();
    again.reader->Finish();
  }
  REQUIRE(started);
  second.context.TryCancel();
  second.reader->Finish();
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace codeco::acm
