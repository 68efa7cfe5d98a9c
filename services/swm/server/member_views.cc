#include "swm/server/member_views.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/backoff.h"
#include "codeco/common/logging.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {

namespace pb = codeco::swm::v1;

bool Covers(const pb::ViewVersion& have, const pb::ViewVersion& need) {
  if (have.incarnation() != need.incarnation()) return have.incarnation() > need.incarnation();
  return have.revision() >= need.revision();
}

MemberViews::MemberViews(MemberViewsOptions options) : options_(options) {}

MemberViews::~MemberViews() {
  std::vector<Member*> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, m] : members_) all.push_back(m.get());
    for (auto& m : retired_) all.push_back(m.get());
  }
  for (Member* m : all) Stop(*m);
}

void MemberViews::Stop(Member& member) {
  {
    absl::MutexLock lock(&mu_);
    member.stop = true;
    if (member.stream != nullptr) member.stream->TryCancel();
  }
  if (member.thread.joinable()) member.thread.join();
}

void MemberViews::Watch(const std::string& cluster, const std::string& address,
                        std::shared_ptr<grpc::Channel> channel) {
  absl::MutexLock lock(&mu_);
  auto it = members_.find(cluster);
  if (it != members_.end()) {
    if (it->second->address == address) return;
    // A new address: the old stream ends (its thread is joined at the end).
    Member& old = *it->second;
    old.stop = true;
    if (old.stream != nullptr) old.stream->TryCancel();
    retired_.push_back(std::move(it->second));
    members_.erase(it);
  }
  auto member = std::make_unique<Member>();
  member->cluster = cluster;
  member->address = address;
  member->channel = std::move(channel);
  Member* raw = member.get();
  members_[cluster] = std::move(member);
  raw->thread = std::thread([this, raw] { Run(raw); });
}

void MemberViews::Saw(const std::string& cluster, const pb::ViewVersion& version) {
  if (version.incarnation() == 0) return;  // an swm that does not version its view
  absl::MutexLock lock(&mu_);
  auto it = members_.find(cluster);
  if (it == members_.end()) return;
  if (!Covers(it->second->needed, version)) it->second->needed = version;
}

bool MemberViews::Synced(const std::string& cluster) {
  absl::MutexLock lock(&mu_);
  auto it = members_.find(cluster);
  return it != members_.end() && it->second->synced;
}

std::optional<McView> MemberViews::Fresh(const std::string& cluster, absl::Time until) {
  absl::MutexLock lock(&mu_);
  auto it = members_.find(cluster);
  if (it == members_.end()) return std::nullopt;
  Member* m = it->second.get();
  auto fresh = [m]() { return m->synced && Covers(m->version, m->needed); };
  auto settled = [m, &fresh]() { return m->down || fresh(); };
  // Real time: how long a placement waits for a stream, not a decision of the core.
  mu_.AwaitWithDeadline(absl::Condition(&settled),
                        std::min(until, absl::Now() + options_.fresh_wait));
  if (!fresh()) return std::nullopt;
  return m->view;
}

void MemberViews::Run(Member* member) {
  Backoff backoff(BackoffPolicy{.initial = options_.retry_min, .max = options_.retry_max},
                  /*seed=*/std::hash<std::string>()(member->cluster));
  auto stub = pb::SwmService::NewStub(member->channel);
  int failures = 0;
  while (true) {
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      if (member->stop) return;
      member->stream = &context;
    }
    pb::WatchClusterViewRequest request;
    request.set_cluster(member->cluster);
    std::unique_ptr<grpc::ClientReader<pb::WatchClusterViewResponse>> reader =
        stub->WatchClusterView(&context, request);
    pb::WatchClusterViewResponse page;
    std::vector<Node> building;
    pb::ViewVersion building_version;
    bool delivered = false;
    while (reader->Read(&page)) {
      if (building.empty() || !Covers(building_version, page.view_version()) ||
          !Covers(page.view_version(), building_version)) {
        // The first page of a view.
        building.clear();
        building_version = page.view_version();
      }
      for (const pb::ClusterNode& n : page.nodes()) building.push_back(FromClusterNode(n));
      if (!page.last_page()) continue;
      absl::MutexLock lock(&mu_);
      member->view.nodes = std::move(building);
      member->view.solves_own_l2 = page.solves_own_l2();
      member->version = building_version;
      member->synced = true;
      member->down = false;
      building.clear();
      delivered = true;
    }
    grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&mu_);
      member->stream = nullptr;
      member->synced = false;
      member->down = true;
      if (member->stop) return;
    }
    failures = delivered ? 1 : failures + 1;
    if (failures == 1) {
      log::Warn("watch of a member's cluster view ended; reading it per placement meanwhile",
                {{"cluster", member->cluster},
                 {"swm", member->address},
                 {"error", status.error_message()}});
    }
    absl::MutexLock lock(&mu_);
    auto stopped = [member]() { return member->stop; };
    mu_.AwaitWithTimeout(absl::Condition(&stopped), backoff.Delay(failures));
  }
}

}  // namespace codeco::swm
