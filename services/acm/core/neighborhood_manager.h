#pragma once
// The ACM neighborhood manager: keeps one neighborhood per application,
// chosen by the NeighborhoodComposer from the registered clusters. The
// similarity partition is rebuilt when older than `repartition_interval`
// (the slow timescale), so selection at deploy time stays cheap.
// Neighborhoods live in the KvStore port, column family "neighborhoods",
// key = neighborhood id, value = codeco.acm.v1.Neighborhood; the revision
// increments whenever the member set changes.

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/cluster_registry.h"
#include "acm/core/neighborhood_composer.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {

/// The port ApplicationManager uses to scope an application.
class NeighborhoodProvider {
 public:
  virtual ~NeighborhoodProvider() = default;
  /// Chooses (or re-chooses) and stores the neighborhood of `application`'s spec.
  virtual absl::StatusOr<v1::Neighborhood> Assign(const v1::ApplicationSpec& spec) = 0;
  /// The neighborhood Assign would choose now, storing nothing.
  virtual absl::StatusOr<v1::Neighborhood> Preview(const v1::ApplicationSpec& spec) = 0;
  /// The stored neighborhood of `application`, or nullopt.
  virtual absl::StatusOr<std::optional<v1::Neighborhood>> Find(const std::string& application) = 0;
  /// Forgets the neighborhood of `application` (deleted).
  virtual absl::Status Release(const std::string& application) = 0;
};

/// Settings of a NeighborhoodManager.
struct NeighborhoodManagerOptions {
  /// Most clusters per neighborhood. Default: 8.
  int max_members = 8;
  /// Age after which the similarity partition is rebuilt. Default: 60 s.
  absl::Duration repartition_interval = absl::Seconds(60);
  /// Page size when a List request gives none. Default: 100.
  int default_page_size = 100;
};

/// Neighborhoods of applications over the registry's clusters.
class NeighborhoodManager final : public NeighborhoodProvider {
 public:
  /// `kv` (with a "neighborhoods" family), `clusters` and `clock` must outlive it.
  NeighborhoodManager(KvStore& kv, ClusterRegistry& clusters, Clock& clock,
                      NeighborhoodManagerOptions options = {});

  absl::StatusOr<v1::Neighborhood> Assign(const v1::ApplicationSpec& spec) override;
  absl::StatusOr<v1::Neighborhood> Preview(const v1::ApplicationSpec& spec) override;
  absl::StatusOr<std::optional<v1::Neighborhood>> Find(const std::string& application) override;
  absl::Status Release(const std::string& application) override;
  /// Rebuilds the similarity partition at the next Assign or Preview (the
  /// registry changed in a way selection must see at once, e.g. a drain).
  void Repartition();

  /// A neighborhood by id or by application.
  absl::StatusOr<v1::GetNeighborhoodResponse> Get(const v1::GetNeighborhoodRequest& request) const;
  /// One page of neighborhoods, optionally only those containing a cluster.
  absl::StatusOr<v1::ListNeighborhoodsResponse> List(
      const v1::ListNeighborhoodsRequest& request) const;

 private:
  KvStore& kv_;
  ClusterRegistry& clusters_;
  Clock& clock_;
  // Selects for `spec` from a partition no older than repartition_interval.
  absl::StatusOr<v1::Neighborhood> SelectLocked(const v1::ApplicationSpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const NeighborhoodManagerOptions options_;
  absl::Mutex mu_;
  NeighborhoodComposer composer_ ABSL_GUARDED_BY(mu_);
  absl::Time partitioned_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

/// A NeighborhoodProvider for tests: every application gets the same fixed members.
class FixedNeighborhoodProvider final : public NeighborhoodProvider {
 public:
  /// Gives every application `clusters` (none: FAILED_PRECONDITION).
  explicit FixedNeighborhoodProvider(std::vector<std::string> clusters)
      : clusters_(std::move(clusters)) {}
  absl::StatusOr<v1::Neighborhood> Assign(const v1::ApplicationSpec& spec) override;
  absl::StatusOr<v1::Neighborhood> Preview(const v1::ApplicationSpec& spec) override {
    return Assign(spec);
  }
  absl::StatusOr<std::optional<v1::Neighborhood>> Find(const std::string& application) override {
    return std::optional<v1::Neighborhood>();
  }
  absl::Status Release(const std::string& application) override { return absl::OkStatus(); }
  /// Replaces the members every later Assign gives.
  void SetClusters(std::vector<std::string> clusters) { clusters_ = std::move(clusters); }

 private:
  std::vector<std::string> clusters_;
};

}  // namespace codeco::acm
