#pragma once
// The checkpointer core's LmsPort and PeerCheckpointers over gRPC: the
// cluster's LMS (codeco.lms.v1) and the checkpointers of other clusters.

#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "checkpointer/core/ports.h"
#include "codeco/common/peer_channels.h"
#include "grpcpp/channel.h"

namespace codeco::checkpointer {

/// LmsPort over an LmsService channel. Thread-safe.
class GrpcLms final : public LmsPort {
 public:
  /// Calls the LMS behind `channel`; each call gets `call_timeout`, and a
  /// restored pod is waited for until it runs for at most `start_timeout`.
  GrpcLms(std::shared_ptr<grpc::Channel> channel, absl::Duration call_timeout,
          absl::Duration start_timeout);
  absl::StatusOr<lms::v1::Pod> GetPod(const std::string& name) override;
  absl::StatusOr<lms::v1::Pod> RestoreContainer(
      const lms::v1::RestoreContainerRequest& request) override;
  absl::StatusOr<lms::v1::Pod> CreatePod(const lms::v1::Pod& pod,
                                         const std::string& request_id) override;
  absl::Status DeletePod(const std::string& name) override;

 private:
  // `pod` once it runs (read again until then, for at most start_timeout).
  absl::StatusOr<lms::v1::Pod> AwaitRunning(lms::v1::Pod pod);

  std::shared_ptr<grpc::Channel> channel_;
  absl::Duration call_timeout_;
  absl::Duration start_timeout_;
};

/// PeerCheckpointers over gRPC to checkpointers at fixed addresses.
class GrpcPeerCheckpointers final : public PeerCheckpointers {
 public:
  /// `addresses`: cluster -> host:port; channels come from `channels` (not
  /// owned). A restore is followed for at most `timeout`.
  GrpcPeerCheckpointers(std::map<std::string, std::string> addresses, PeerChannels& channels,
                        absl::Duration timeout);
  absl::StatusOr<v1::Checkpoint> Restore(
      const std::string& cluster, const v1::RestoreCheckpointRequest& request,
      const std::function<void(const common::v1::Operation&)>& progress) override;

 private:
  std::map<std::string, std::string> addresses_;
  PeerChannels& channels_;
  absl::Duration timeout_;
};

}  // namespace codeco::checkpointer
