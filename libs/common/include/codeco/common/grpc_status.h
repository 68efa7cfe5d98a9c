#pragma once
// The one place absl::Status and grpc::Status are translated. Canonical codes
// map one to one; messages pass through unchanged.

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace codeco {

/// The gRPC status a handler answers for a core result.
grpc::Status ToGrpcStatus(const absl::Status& status);

/// The absl status a core sees for a gRPC call result (e.g. from a peer).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace codeco
