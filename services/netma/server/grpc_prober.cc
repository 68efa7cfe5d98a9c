#include "netma/server/grpc_prober.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/status.h"
#include "codeco/common/tls.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace codeco::netma {
namespace {

// Rough per-call cost of HTTP/2 frames and (HPACK-compressed) headers on an
// established channel, bytes each way; added to message sizes for overhead accounting.
constexpr int64_t kCallOverheadBytes = 120;

// The shortest upload time a bulk sample can resolve.
constexpr absl::Duration kBulkResolution = absl::Milliseconds(1);

absl::Duration Since(std::chrono::steady_clock::time_point start) {
  return absl::FromChrono(std::chrono::steady_clock::now() - start);
}

}  // namespace

absl::StatusOr<Prober::Result> GrpcProber::Probe(const ProbeTask& task) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(task.peer.address));
  auto deadline = std::chrono::system_clock::now() + absl::ToChronoNanoseconds(task.timeout);
  Result result;

  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    // A call before the channel is up would time connection setup, not the
    // path: wait for READY first (within the same deadline).
    if (!channel->WaitForConnected(deadline)) {
      return absl::UnavailableError(
          absl::StrCat("peer ", task.peer.cluster, " at ", task.peer.address, ": not connected"));
    }
    auto start = std::chrono::steady_clock::now();
    grpc::Status status =
        grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
    result.rtt = Since(start);
    if (!status.ok()) return FromGrpcStatus(status);
    result.wire_bytes += 2 * kCallOverheadBytes + static_cast<int64_t>(response.ByteSizeLong());
  }
  if (task.bulk_bytes > 0) {
    codeco::netma::v1::ProbeBulkRequest bulk;
    bulk.mutable_payload()->assign(static_cast<size_t>(task.bulk_bytes), '\0');
    codeco::netma::v1::ProbeBulkResponse ack;
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto start = std::chrono::steady_clock::now();
    grpc::Status status =
        codeco::netma::v1::NetmaService::NewStub(channel)->ProbeBulk(&context, bulk, &ack);
    absl::Duration elapsed = Since(start);
    if (!status.ok()) return FromGrpcStatus(status);
    result.wire_bytes += 2 * kCallOverheadBytes + static_cast<int64_t>(bulk.ByteSizeLong()) +
                         static_cast<int64_t>(ack.ByteSizeLong());
    // The upload takes the call time minus one round trip (the request's
    // first byte out and the answer back). Below a millisecond that
    // difference is timing noise, so a faster sample only says the link
    // carries at least bulk_bytes per millisecond (raise netma.bulk_bytes to
    // measure faster links).
    result.bulk_bytes = ack.received_bytes();
    result.bulk_duration = std::max(elapsed - result.rtt, kBulkResolution);
  }
  return result;
}

absl::StatusOr<absl::Duration> GrpcProber::ProbeSelf(absl::Duration timeout) {
  if (self_address_.empty()) return absl::UnimplementedError("no self address to probe");
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(self_address_));
  auto deadline = std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("self at ", self_address_, ": not connected"));
  }
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  auto start = std::chrono::steady_clock::now();
  grpc::Status status =
      grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
  absl::Duration rtt = Since(start);
  if (!status.ok()) return FromGrpcStatus(status);
  return rtt;
}

absl::StatusOr<PeerSummaryExchange::Reply> GrpcSummaryExchange::Exchange(
    const Peer& peer, const codeco::netma::v1::PeerSummary& mine) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(peer.address));
  grpc::ClientContext context;
  SetOutgoingDeadline(context, timeout_);
  codeco::netma::v1::ExchangeSummaryRequest request;
  *request.mutable_summary() = mine;
  codeco::netma::v1::ExchangeSummaryResponse response;
  grpc::Status status = codeco::netma::v1::NetmaService::NewStub(channel)->ExchangeSummary(
      &context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  Reply reply;
  reply.summary = response.summary();
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr) {
    absl::StatusOr<SpiffeIdentity> identity = PeerIdentity(*auth);
    if (identity.ok()) reply.cluster = identity->cluster;
  }
  if (reply.cluster.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("peer ", peer.address, " has no identity"));
  }
  return reply;
}

}  // namespace codeco::netma
