#include "codeco/common/etcd_client.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/service_config.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace codeco {
namespace {

// Pause between two rounds over every member, so a cluster without a leader
// (an election takes about a second) is not hammered.
constexpr absl::Duration kRoundPause = absl::Milliseconds(200);

bool MovesToNextMember(const grpc::Status& status) {
  // UNAVAILABLE: the member is down, or is up without a leader ("etcdserver:
  // no leader", "leader changed"). DEADLINE_EXCEEDED: the attempt timed out.
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdClientOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd: at least one endpoint is required");
  }
  if (options.attempt_timeout <= absl::ZeroDuration() ||
      options.call_timeout < options.attempt_timeout) {
    return absl::InvalidArgumentError(
        "etcd: attempt_timeout must be positive and at most call_timeout");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls.ca_file.empty()) {
    for (const std::string& endpoint : options.endpoints) {
      if (!IsLoopbackAddress(endpoint)) {
        return absl::InvalidArgumentError(
            absl::StrCat("etcd: plaintext is allowed only on loopback, but endpoint ", endpoint,
                         " is not; configure the etcd TLS files"));
      }
    }
    credentials = grpc::InsecureChannelCredentials();
  } else {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        MakeChannelCredentials(options.tls);
    if (!tls.ok()) return tls.status();
    credentials = *tls;
  }
  auto client = std::unique_ptr<EtcdClient>(new EtcdClient());
  client->options_ = options;
  for (const std::string& endpoint : options.endpoints) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(options.max_message_bytes);
    args.SetMaxReceiveMessageSize(options.max_message_bytes);
    // A member that went away is retried soon, not after gRPC's default 20 s.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Each member a channel of its own (not a shared subchannel pool entry).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(endpoint, credentials, args);
    client->members_.push_back(
        {endpoint, etcdserverpb::KV::NewStub(channel), etcdserverpb::Lease::NewStub(channel)});
  }
  return client;
}

template <typename Attempt>
absl::Status EtcdClient::WithFailover(const char* method, absl::Duration timeout,
                                      const Attempt& attempt) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> failures;
  size_t tried_in_round = 0;
  while (true) {
    const size_t index = current_.load() % members_.size();
    Member& member = members_[index];
    grpc::ClientContext context;
    const absl::Time attempt_deadline = std::min(deadline, absl::Now() + options_.attempt_timeout);
    context.set_deadline(absl::ToChronoTime(attempt_deadline));
    const grpc::Status status = attempt(member, context);
    if (status.ok()) return absl::OkStatus();
    if (!MovesToNextMember(status)) {
      absl::Status error = FromGrpcStatus(status);
      return absl::Status(error.code(), absl::StrCat("etcd ", method, " at ", member.endpoint, ": ",
                                                     status.error_message()));
    }
    failures.push_back(absl::StrCat(member.endpoint, ": ", status.error_message()));
    // Move on to the next member (another thread may have moved already).
    size_t expected = index;
    current_.compare_exchange_strong(expected, (index + 1) % members_.size());
    if (++tried_in_round >= members_.size()) {
      tried_in_round = 0;
      if (absl::Now() + kRoundPause >= deadline) break;
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(kRoundPause));
    }
    if (absl::Now() >= deadline) break;
  }
  // Keep the error bounded: the last few failures say enough.
  if (failures.size() > 3) failures.erase(failures.begin(), failures.end() - 3);
  return absl::UnavailableError(absl::StrCat("etcd ", method, ": no member answered within ",
                                             absl::FormatDuration(timeout), " (",
                                             absl::StrJoin(failures, "; "), ")"));
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  etcdserverpb::RangeResponse response;
  absl::Status status = WithFailover("Range", options_.call_timeout,
                                     [&](Member& member, grpc::ClientContext& context) {
                                       response.Clear();
                                       return member.kv->Range(&context, request, &response);
                                     });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  absl::Status status =
      WithFailover("Txn", options_.call_timeout, [&](Member& member, grpc::ClientContext& context) {
        response.Clear();
        return member.kv->Txn(&context, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status = WithFailover(
      "LeaseGrant", options_.call_timeout, [&](Member& member, grpc::ClientContext& context) {
        response.Clear();
        return member.lease->LeaseGrant(&context, request, &response);
      });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd LeaseGrant: ", response.error()));
  }
  return response.id();
}

absl::Status EtcdClient::RevokeLease(int64_t id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  absl::Status status = WithFailover(
      "LeaseRevoke", options_.call_timeout, [&](Member& member, grpc::ClientContext& context) {
        return member.lease->LeaseRevoke(&context, request, &response);
      });
  // A lease that is already gone is what revoking wanted.
  if (status.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return status;
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t id, absl::Duration timeout) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(id);
  etcdserverpb::LeaseKeepAliveResponse response;
  absl::Status status = WithFailover(
      "LeaseKeepAlive", std::min(timeout, options_.call_timeout),
      [&](Member& member, grpc::ClientContext& context) {
        response.Clear();
        auto stream = member.lease->LeaseKeepAlive(&context);
        const bool answered = stream->Write(request) && stream->Read(&response);
        stream->WritesDone();
        grpc::Status finished = stream->Finish();
        if (finished.ok() && !answered) {
          // No answer is not "the lease is gone": try another member.
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended unanswered");
        }
        return finished;
      });
  if (!status.ok()) return status;
  return response.ttl();
}

std::vector<std::string> EtcdMemberCommand(const EtcdMemberSpec& member) {
  std::vector<std::string> command = {kEtcdBinary,
                                      "--name",
                                      member.name,
                                      "--data-dir",
                                      member.data_dir,
                                      "--listen-client-urls",
                                      member.client_url,
                                      "--advertise-client-urls",
                                      member.client_url,
                                      "--listen-peer-urls",
                                      member.peer_url,
                                      "--initial-advertise-peer-urls",
                                      member.peer_url,
                                      "--initial-cluster",
                                      member.initial_cluster,
                                      "--initial-cluster-state",
                                      member.rejoin ? "existing" : "new",
                                      "--initial-cluster-token",
                                      member.cluster_token,
                                      "--heartbeat-interval",
                                      "100",
                                      "--election-timeout",
                                      "1000",
                                      "--max-txn-ops",
                                      "4096",
                                      "--max-request-bytes",
                                      "8388608",
                                      "--logger",
                                      "zap",
                                      "--log-level",
                                      "warn"};
  if (!member.tls.ca_file.empty()) {
    for (const std::string& side : {std::string("--"), std::string("--peer-")}) {
      command.insert(command.end(), {side + "cert-file", member.tls.cert_file, side + "key-file",
                                     member.tls.key_file, side + "trusted-ca-file",
                                     member.tls.ca_file, side + "client-cert-auth"});
    }
  }
  return command;
}

absl::Status WaitForEtcd(const std::vector<std::string>& endpoints, absl::Time deadline,
                         const TlsFiles& tls) {
  absl::Status last = absl::DeadlineExceededError("not asked yet");
  while (absl::Now() < deadline) {
    // New channels for every probe: a member still joining accepts the
    // connection but answers no TLS handshake, and a channel whose first
    // attempt hung there can stay unusable well after the member serves.
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Connect({.endpoints = endpoints,
                             .tls = tls,
                             .attempt_timeout = absl::Seconds(1),
                             .call_timeout = absl::Seconds(2)});
    if (!client.ok()) return client.status();
    etcdserverpb::RangeRequest probe;
    probe.set_key("/codeco/ready");
    last = (*client)->Range(probe).status();
    if (last.ok()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("etcd has no leader yet: ", last.message()));
}

}  // namespace codeco
