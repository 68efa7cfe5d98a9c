#pragma once
// The LMS contract: what every implementation of codeco.lms.v1.LmsService
// must do, whatever runs the cluster behind it (CODEF's emulator, the
// Kubernetes adapter). One check, run by each implementation's tests, so
// the two cannot drift apart.

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"

namespace codeco::testing {

/// An LMS to check, and what the check needs to know about its cluster.
struct LmsUnderTest {
  /// A stub of the LMS.
  codeco::lms::v1::LmsService::Stub* stub = nullptr;
  /// A ready, schedulable node with room for two pods of 100m CPU and 64 MiB.
  std::string node;
  /// Lets time pass so created pods can start and deleted ones go (a
  /// simulated clock's step; nothing under real time). Called between polls.
  std::function<void()> advance = [] {};
};

/// Reads one pod watch of an LMS on a thread of its own, so a test can act
/// and then wait for what the watch saw.
class PodWatchReader {
 public:
  /// Opens WatchPods(`request`) on `stub` (the stream lasts at most 2 min).
  PodWatchReader(codeco::lms::v1::LmsService::Stub* stub,
                 const codeco::lms::v1::WatchPodsRequest& request);
  ~PodWatchReader();
  PodWatchReader(const PodWatchReader&) = delete;
  PodWatchReader& operator=(const PodWatchReader&) = delete;

  /// Waits until `found` holds for the events so far, calling `advance`
  /// between looks; false when the stream ended first or after 30 s.
  bool WaitFor(
      const std::function<bool(const std::vector<codeco::lms::v1::WatchPodsResponse>&)>& found,
      const std::function<void()>& advance = [] {});
  /// Waits until an event of `type` for pod `name` arrived.
  bool Saw(codeco::common::v1::WatchEventType type, const std::string& name);
  /// Waits (up to 30 s) for the stream to end; its status (UNKNOWN "still
  /// open" when it did not).
  grpc::Status End();

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<codeco::lms::v1::WatchPodsResponse>> reader_;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<codeco::lms::v1::WatchPodsResponse> seen_ ABSL_GUARDED_BY(mu_);
  grpc::Status end_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

/// Runs the contract: nodes (list, pages, label selectors, get), pods
/// (create with validation, idempotent retry, duplicates, get, list with
/// filters and pages, delete), watches from a list's version and from
/// nothing, usage, and the error codes of each. Fails the current Catch2
/// test at the first breach. Leaves no pod behind.
void CheckLmsContract(const LmsUnderTest& lms);

}  // namespace codeco::testing
