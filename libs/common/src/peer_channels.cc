#include "codeco/common/peer_channels.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codeco/common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace codeco {

PeerChannelOptions PeerChannelOptionsFrom(const ServiceConfig& config) {
  return {config.insecure, config.tls, config.egress_proxy,
          config.listen.substr(0, config.listen.rfind(':'))};
}

absl::StatusOr<std::unique_ptr<PeerChannels>> PeerChannels::Create(
    const PeerChannelOptions& options) {
  std::unique_ptr<PeerChannels> out(new PeerChannels());
  out->options_ = options;
  if (options.insecure) {
    out->credentials_ = grpc::InsecureChannelCredentials();
  } else {
    auto creds = MakeChannelCredentials(options.tls);
    if (!creds.ok()) return creds.status();
    out->credentials_ = *creds;
  }
  return out;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> PeerChannels::Get(const std::string& target) {
  if (options_.insecure && !IsLoopbackAddress(target)) {
    return absl::FailedPreconditionError(
        absl::StrCat("plaintext channels reach loopback only, not ", target,
                     "; configure tls.* for peers on other hosts"));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  auto it = channels_.find(target);
  if (it != channels_.end() && (options_.max_channel_age <= absl::ZeroDuration() ||
                                now - it->second.created < options_.max_channel_age)) {
    return it->second.channel;
  }
  grpc::ChannelArguments args;
  const std::string host = target.substr(0, target.rfind(':'));
  if (!options_.egress_proxy.empty() && host != options_.local_ip) {
    args.SetString("grpc.http_proxy", "http://" + options_.egress_proxy);
  } else {
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);  // not the *_proxy environment variables
  }
  if (options_.max_reconnect_backoff > absl::ZeroDuration()) {
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.max_reconnect_backoff)));
  }
  if (options_.max_channel_age > absl::ZeroDuration()) {
    // A distinct channel (no subchannel shared with the one it replaces), so
    // renewing really opens a new connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  }
  auto channel = grpc::CreateCustomChannel(target, credentials_, args);
  channels_[target] = {channel, now};
  return channel;
}

}  // namespace codeco
