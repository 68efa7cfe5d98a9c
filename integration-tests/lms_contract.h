#pragma once
// The LMS contract: what every implementation of codeco.lms.v1.LmsService
// must do, whatever runs the cluster behind it (CODEF's emulator, the
// Kubernetes adapter). One check, run by each implementation's tests, so
// the two cannot drift apart.

#include <functional>
#include <string>

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

/// Runs the contract: nodes (list, pages, label selectors, get), pods
/// (create with validation, idempotent retry, duplicates, get, list with
/// filters and pages, delete), watches from a list's version and from
/// nothing, usage, and the error codes of each. Fails the current Catch2
/// test at the first breach. Leaves no pod behind.
void CheckLmsContract(const LmsUnderTest& lms);

}  // namespace codeco::testing
