#include "codeco/common/leader_election.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/logging.h"

namespace codeco {

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Start(
    std::shared_ptr<EtcdClient> client, const LeaderElectionOptions& options,
    std::function<void(const absl::Status&)> on_lost) {
  if (client == nullptr) return absl::InvalidArgumentError("leader election: no etcd client");
  if (options.key.empty()) return absl::InvalidArgumentError("ha.election_key: required");
  if (options.identity.empty()) return absl::InvalidArgumentError("ha.identity: required");
  if (options.lease_ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError(absl::StrCat("ha.lease_ttl: must be at least 2s, not ",
                                                   absl::FormatDuration(options.lease_ttl)));
  }
  absl::StatusOr<int64_t> lease = client->GrantLease(options.lease_ttl);
  if (!lease.ok()) return lease.status();
  auto election = std::unique_ptr<LeaderElection>(
      new LeaderElection(std::move(client), options, std::move(on_lost), *lease));
  election->renewer_ = std::thread([raw = election.get()] { raw->RenewLoop(); });
  return election;
}

LeaderElection::LeaderElection(std::shared_ptr<EtcdClient> client, LeaderElectionOptions options,
                               std::function<void(const absl::Status&)> on_lost, int64_t lease)
    : client_(std::move(client)),
      options_(std::move(options)),
      on_lost_(std::move(on_lost)),
      lease_(lease) {}

LeaderElection::~LeaderElection() { StopRenewing(); }

void LeaderElection::StopRenewing() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (renewer_.joinable()) renewer_.join();
}

void LeaderElection::RenewLoop() {
  const absl::Duration interval = options_.lease_ttl / 3;
  // Declared lost a margin before etcd can expire it (a fifth of the TTL, at
  // most 1 s), so an old leader stops about when a new one can start. The
  // margin is not what keeps them apart: the fence on every write is.
  const absl::Duration give_up_after =
      options_.lease_ttl - std::min(options_.lease_ttl / 5, absl::Seconds(1));
  // After a failed renewal, the next try comes soon: an etcd leader election
  // (about 1-2 s) must not cost the lease.
  const absl::Duration retry_after_failure = std::min(interval, absl::Milliseconds(250));
  absl::Time last_renewed = absl::Now();
  absl::Duration wait = interval;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait)) return;
    }
    // A renewal may take only the time left before the lease counts as lost.
    const absl::Duration left =
        std::max(absl::Milliseconds(100), give_up_after - (absl::Now() - last_renewed));
    absl::StatusOr<int64_t> ttl = client_->KeepAlive(lease_, left);
    if (ttl.ok() && *ttl > 0) {
      last_renewed = absl::Now();
      wait = interval;
      continue;
    }
    absl::Status lost;
    if (ttl.ok()) {
      lost = absl::UnavailableError(
          absl::StrCat("lease ", lease_, " of ", options_.key, " expired in etcd"));
    } else if (absl::Now() - last_renewed >= give_up_after) {
      lost = absl::UnavailableError(absl::StrCat(
          "lease ", lease_, " of ", options_.key, " not renewed for ",
          absl::FormatDuration(absl::Now() - last_renewed), ": ", ttl.status().message()));
    } else {
      log::Warn("lease renewal failed; retrying",
                {{"key", options_.key}, {"error", std::string(ttl.status().message())}});
      wait = retry_after_failure;
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    log::Error("leadership lease lost",
               {{"key", options_.key}, {"error", std::string(lost.message())}});
    if (on_lost_) on_lost_(lost);
    return;
  }
}

absl::StatusOr<bool> LeaderElection::TryAcquire() {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* absent = txn.add_compare();
  absent->set_key(options_.key);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_create_revision(0);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(options_.identity);
  put->set_lease(lease_);
  txn.add_failure()->mutable_request_range()->set_key(options_.key);
  absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
  if (!response.ok()) return response.status();
  absl::MutexLock lock(&mu_);
  if (resigned_) return absl::FailedPreconditionError("leader election: already resigned");
  if (response->succeeded()) {
    create_revision_ = response->header().revision();
    return true;
  }
  // The key exists: ours when it carries our lease (a retried acquire whose
  // first answer was lost), another replica's otherwise.
  if (response->responses_size() == 1 && response->responses(0).has_response_range() &&
      response->responses(0).response_range().kvs_size() == 1) {
    const etcdserverpb::KeyValue& holder = response->responses(0).response_range().kvs(0);
    if (holder.lease() == lease_) {
      create_revision_ = holder.create_revision();
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::string> LeaderElection::Holder() {
  etcdserverpb::RangeRequest request;
  request.set_key(options_.key);
  absl::StatusOr<etcdserverpb::RangeResponse> response = client_->Range(request);
  if (!response.ok()) return response.status();
  if (response->kvs_size() == 0) return std::string();
  return response->kvs(0).value();
}

int64_t LeaderElection::create_revision() const {
  absl::MutexLock lock(&mu_);
  return create_revision_;
}

absl::Status LeaderElection::Resign() {
  int64_t revision = 0;
  {
    absl::MutexLock lock(&mu_);
    if (resigned_) return absl::OkStatus();
    resigned_ = true;
    revision = create_revision_;
    create_revision_ = 0;
  }
  StopRenewing();
  absl::Status status;
  if (revision != 0) {
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare* ours = txn.add_compare();
    ours->set_key(options_.key);
    ours->set_target(etcdserverpb::Compare::CREATE);
    ours->set_result(etcdserverpb::Compare::EQUAL);
    ours->set_create_revision(revision);
    txn.add_success()->mutable_request_delete_range()->set_key(options_.key);
    status = client_->Txn(txn).status();
  }
  absl::Status revoked = client_->RevokeLease(lease_);
  return status.ok() ? revoked : status;
}

}  // namespace codeco
