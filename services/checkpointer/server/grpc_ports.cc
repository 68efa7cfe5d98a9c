#include "checkpointer/server/grpc_ports.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codeco/checkpointer/v1/checkpointer_service.grpc.pb.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/status.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace codeco::checkpointer {
namespace {

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
}

}  // namespace

GrpcLms::GrpcLms(std::shared_ptr<grpc::Channel> channel, absl::Duration call_timeout,
                 absl::Duration start_timeout)
    : channel_(std::move(channel)), call_timeout_(call_timeout), start_timeout_(start_timeout) {}

absl::StatusOr<lms::v1::Pod> GrpcLms::GetPod(const std::string& name) {
  lms::v1::LmsService::Stub stub(channel_);
  grpc::ClientContext context;
  SetDeadline(context, call_timeout_);
  lms::v1::GetPodRequest request;
  request.set_name(name);
  lms::v1::GetPodResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub.GetPod(&context, request, &response)));
  return response.pod();
}

absl::StatusOr<lms::v1::Pod> GrpcLms::RestoreContainer(
    const lms::v1::RestoreContainerRequest& request) {
  lms::v1::LmsService::Stub stub(channel_);
  lms::v1::RestoreContainerResponse response;
  grpc::ClientContext context;
  // Loading the state is part of the call on some LMSs.
  SetDeadline(context, start_timeout_);
  RETURN_IF_ERROR(FromGrpcStatus(stub.RestoreContainer(&context, request, &response)));
  return AwaitRunning(response.pod());
}

absl::StatusOr<lms::v1::Pod> GrpcLms::CreatePod(const lms::v1::Pod& pod,
                                                const std::string& request_id) {
  lms::v1::LmsService::Stub stub(channel_);
  lms::v1::CreatePodRequest request;
  *request.mutable_pod() = pod;
  request.set_request_id(request_id);
  lms::v1::CreatePodResponse response;
  grpc::ClientContext context;
  SetDeadline(context, start_timeout_);
  RETURN_IF_ERROR(FromGrpcStatus(stub.CreatePod(&context, request, &response)));
  return AwaitRunning(response.pod());
}

absl::StatusOr<lms::v1::Pod> GrpcLms::AwaitRunning(lms::v1::Pod pod) {
  // An LMS may answer while the container still starts.
  const absl::Time deadline = absl::Now() + start_timeout_;
  while (pod.phase() != lms::v1::POD_PHASE_RUNNING) {
    if (pod.phase() == lms::v1::POD_PHASE_FAILED || pod.phase() == lms::v1::POD_PHASE_SUCCEEDED) {
      return absl::FailedPreconditionError(absl::StrCat("the pod ", pod.name(), " is ",
                                                        lms::v1::PodPhase_Name(pod.phase()),
                                                        ": ", pod.message()));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the pod ", pod.name(),
                                                      " did not run within ",
                                                      absl::FormatDuration(start_timeout_)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSIGN_OR_RETURN(pod, GetPod(pod.name()));
  }
  return pod;
}

absl::Status GrpcLms::DeletePod(const std::string& name) {
  lms::v1::LmsService::Stub stub(channel_);
  grpc::ClientContext context;
  SetDeadline(context, call_timeout_);
  lms::v1::DeletePodRequest request;
  request.set_name(name);
  lms::v1::DeletePodResponse response;
  absl::Status status = FromGrpcStatus(stub.DeletePod(&context, request, &response));
  return absl::IsNotFound(status) ? absl::OkStatus() : status;
}

GrpcPeerCheckpointers::GrpcPeerCheckpointers(std::map<std::string, std::string> addresses,
                                             PeerChannels& channels, absl::Duration timeout)
    : addresses_(std::move(addresses)), channels_(channels), timeout_(timeout) {}

absl::StatusOr<v1::Checkpoint> GrpcPeerCheckpointers::Restore(
    const std::string& cluster, const v1::RestoreCheckpointRequest& request,
    const std::function<void(const common::v1::Operation&)>& progress) {
  auto address = addresses_.find(cluster);
  if (address == addresses_.end()) {
    return absl::NotFoundError(absl::StrCat("no checkpointer is known for cluster ", cluster,
                                            " (checkpointer.peers)"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(address->second));
  v1::CheckpointerService::Stub stub(channel);
  v1::RestoreCheckpointResponse started;
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    absl::Status status = FromGrpcStatus(stub.RestoreCheckpoint(&context, request, &started));
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("the checkpointer of ", cluster, ": ",
                                                      status.message()));
    }
  }
  // Follow the operation; a broken stream is re-opened (the restore goes on there).
  const absl::Time deadline = absl::Now() + timeout_;
  common::v1::Operation op = started.operation();
  absl::Status last = absl::OkStatus();
  while (!op.done()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the restore at ", cluster, " (", op.id(), ") did not finish within ",
          absl::FormatDuration(timeout_), "; last: ", op.phase()));
    }
    grpc::ClientContext context;
    SetDeadline(context, deadline - absl::Now());
    v1::WatchOperationRequest watch;
    watch.set_id(op.id());
    std::unique_ptr<grpc::ClientReader<v1::WatchOperationResponse>> reader =
        stub.WatchOperation(&context, watch);
    v1::WatchOperationResponse update;
    while (reader->Read(&update)) {
      op = update.operation();
      progress(op);
      if (op.done()) break;
    }
    if (op.done()) {
      context.TryCancel();
      break;
    }
    last = FromGrpcStatus(reader->Finish());
    if (!last.ok() && !absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last) &&
        !absl::IsCancelled(last) && !absl::IsResourceExhausted(last)) {
      return absl::Status(last.code(), absl::StrCat("following the restore at ", cluster, " (",
                                                    op.id(), "): ", last.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (op.has_error() && op.error().code() != common::v1::ERROR_CODE_UNSPECIFIED) {
    return absl::Status(static_cast<absl::StatusCode>(op.error().code()),
                        absl::StrCat("the restore at ", cluster, ": ", op.error().message()));
  }
  v1::Checkpoint restored;
  if (!op.result().UnpackTo(&restored)) {
    return absl::InternalError(absl::StrCat("the restore at ", cluster,
                                            " finished without a Checkpoint result"));
  }
  return restored;
}

}  // namespace codeco::checkpointer
