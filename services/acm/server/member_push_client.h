#pragma once
// The hub ACM's pushes to managed clusters over gRPC: MemberPushPort on the
// PushNeighborhood / PushAssignment RPCs of each cluster's own ACM, and the
// loop that runs a MemberPublisher whenever an application changes (and at
// least every `interval`, so a failed push is not the last word before the
// agent's next pull).

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/member_publisher.h"
#include "codeco/common/peer_channels.h"

namespace codeco::acm {

/// MemberPushPort over gRPC, with this process's identity (PeerChannels).
class GrpcMemberPush final : public MemberPushPort {
 public:
  /// Calls through `peers` (which must outlive it), each with `timeout`.
  GrpcMemberPush(PeerChannels& peers, absl::Duration timeout) : peers_(peers), timeout_(timeout) {}
  absl::Status PushNeighborhood(const std::string& cluster, const std::string& endpoint,
                                const v1::PushNeighborhoodRequest& request) override;
  absl::Status PushAssignment(const std::string& cluster, const std::string& endpoint,
                              const v1::PushAssignmentRequest& request) override;

 private:
  PeerChannels& peers_;
  const absl::Duration timeout_;
};

/// Runs `publisher` on its own thread: after every application change and
/// every `interval`, until destroyed.
class MemberPublisherLoop {
 public:
  /// Publishes the changes of `manager` after its current revision through
  /// `push`; `manager`, `neighborhoods`, `clusters` and `clock` must outlive the loop.
  MemberPublisherLoop(ApplicationManager& manager, NeighborhoodProvider& neighborhoods,
                      const ClusterRegistry& clusters, const Clock& clock,
                      std::unique_ptr<MemberPushPort> push, absl::Duration interval);
  /// Stops the thread (waits for a running Step).
  ~MemberPublisherLoop();

 private:
  void Run();

  ApplicationManager& manager_;
  std::unique_ptr<MemberPushPort> push_;
  std::unique_ptr<MemberPublisher> publisher_;
  const absl::Duration interval_;
  int listener_ = 0;
  absl::Mutex mu_;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::acm
