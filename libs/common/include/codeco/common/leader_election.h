#pragma once
// One leader among a service's replicas, by an etcd lease (the scheme of
// Kubernetes' and etcd's own election helpers). Each replica holds a lease it
// renews every third of its TTL. The leader is the replica whose transaction
// created the leader key, attached to its lease; when the leader dies, its
// lease expires after the TTL, etcd deletes the key, and the next replica to
// try creates it. The key's create revision fences the leader's writes
// (EtcdFence): a replica whose key was replaced can no longer write.
//
// A replica that cannot renew its lease for the TTL less a margin (a fifth of
// it, at most 1 s) declares it lost, before etcd expires it, and is told
// through `on_lost`. A leader of codeco's services then exits and is restarted
// as a standby (fail-stop); a standby takes a new lease and goes on waiting.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/etcd_client.h"

namespace codeco {

/// How to take part in an election.
struct LeaderElectionOptions {
  /// The leader key, e.g. "/codeco/hub/acm/leader". Required.
  std::string key;
  /// This replica's name, stored as the key's value (host/pid by default).
  /// Required.
  std::string identity;
  /// Lease time to live: how long a dead leader blocks the others. At least
  /// 2 s. Default: 5 s.
  absl::Duration lease_ttl = absl::Seconds(5);
};

/// A replica's part in one election. Thread-safe.
class LeaderElection {
 public:
  /// Grants this replica's lease and starts renewing it on a thread of its
  /// own; `on_lost` runs once (on that thread) if the lease is lost. Does not
  /// campaign yet.
  static absl::StatusOr<std::unique_ptr<LeaderElection>> Start(
      std::shared_ptr<EtcdClient> client, const LeaderElectionOptions& options,
      std::function<void(const absl::Status&)> on_lost);
  /// Stops renewing (without resigning: the lease then runs out by itself).
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  /// One try to become leader: true when this replica holds the key now
  /// (created it, or already held it), false when another does.
  absl::StatusOr<bool> TryAcquire();
  /// The identity stored in the key now; "" when nobody leads.
  absl::StatusOr<std::string> Holder();
  /// The leader key's create revision while this replica leads (0 before).
  int64_t create_revision() const;
  /// The options this election runs with.
  const LeaderElectionOptions& options() const { return options_; }
  /// Gives leadership up at once: stops renewing, deletes the key if this
  /// replica holds it, and revokes the lease. Idempotent.
  absl::Status Resign();

 private:
  LeaderElection(std::shared_ptr<EtcdClient> client, LeaderElectionOptions options,
                 std::function<void(const absl::Status&)> on_lost, int64_t lease);
  void RenewLoop();
  void StopRenewing();

  std::shared_ptr<EtcdClient> client_;
  const LeaderElectionOptions options_;
  const std::function<void(const absl::Status&)> on_lost_;
  const int64_t lease_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool resigned_ ABSL_GUARDED_BY(mu_) = false;
  int64_t create_revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread renewer_;
};

}  // namespace codeco
