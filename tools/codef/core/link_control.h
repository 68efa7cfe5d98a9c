#pragma once
// The port through which CODEF changes inter-cluster links. The real
// implementation drives the link emulator (tools/codef/relay); the in-memory
// one only remembers the conditions (used in tests, and when codef is built
// without the relay, where links are then not enforced).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace codeco::codef {

/// Conditions of one direction of a link.
struct LinkProperties {
  /// One-way latency, nanoseconds.
  int64_t one_way_latency_ns = 0;
  /// Bandwidth cap, bits per second (0 = unlimited).
  int64_t bandwidth_bps = 0;
  /// Loss ratio, 0-1.
  double loss = 0;
  /// Nothing gets through.
  bool cut = false;
};

/// Changes the links between clusters. Thread-safe.
class LinkControl {
 public:
  virtual ~LinkControl() = default;
  /// Sets the directed link from `from` to `to`.
  virtual absl::Status SetLink(const std::string& from, const std::string& to,
                               const LinkProperties& properties) = 0;
  /// The directed link from `from` to `to`; NOT_FOUND when never set.
  virtual absl::StatusOr<LinkProperties> GetLink(const std::string& from,
                                                 const std::string& to) const = 0;
  /// Cuts (or restores) every link to and from `cluster`, keeping their settings.
  virtual absl::Status SetPartitioned(const std::string& cluster, bool partitioned) = 0;
  /// Installs (or replaces, by `id`) a virtual link on the edge devices:
  /// channel traffic from `source` to `endpoint` ("host:port") in `target` passes.
  virtual absl::Status PutVirtualLink(const std::string& id, const std::string& source,
                                      const std::string& target, const std::string& endpoint) = 0;
  /// Removes virtual link `id`; NOT_FOUND when it is not installed.
  virtual absl::Status DeleteVirtualLink(const std::string& id) = 0;
  /// How many virtual links are installed.
  virtual size_t VirtualLinkCount() const = 0;
};

/// A LinkControl that only records (test double and relay-less fallback).
class InMemoryLinkControl final : public LinkControl {
 public:
  absl::Status SetLink(const std::string& from, const std::string& to,
                       const LinkProperties& properties) override;
  absl::StatusOr<LinkProperties> GetLink(const std::string& from,
                                         const std::string& to) const override;
  absl::Status SetPartitioned(const std::string& cluster, bool partitioned) override;
  absl::Status PutVirtualLink(const std::string& id, const std::string& source,
                              const std::string& target, const std::string& endpoint) override;
  absl::Status DeleteVirtualLink(const std::string& id) override;
  size_t VirtualLinkCount() const override;
  /// True while `cluster` is partitioned.
  bool IsPartitioned(const std::string& cluster) const;

 private:
  mutable absl::Mutex mu_;
  std::set<std::string> virtual_links_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, LinkProperties> links_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> partitioned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::codef
