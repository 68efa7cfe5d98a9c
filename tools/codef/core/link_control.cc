#include "link_control.h"

#include "absl/strings/str_cat.h"

namespace codeco::codef {

absl::Status InMemoryLinkControl::SetLink(const std::string& from, const std::string& to,
                                          const LinkProperties& properties) {
  absl::MutexLock lock(&mu_);
  links_[{from, to}] = properties;
  return absl::OkStatus();
}

absl::StatusOr<LinkProperties> InMemoryLinkControl::GetLink(const std::string& from,
                                                            const std::string& to) const {
  absl::MutexLock lock(&mu_);
  auto it = links_.find({from, to});
  if (it == links_.end()) {
    return absl::NotFoundError(absl::StrCat("no link from ", from, " to ", to));
  }
  LinkProperties out = it->second;
  if (partitioned_.count(from) > 0 || partitioned_.count(to) > 0) out.cut = true;
  return out;
}

absl::Status InMemoryLinkControl::SetPartitioned(const std::string& cluster, bool partitioned) {
  absl::MutexLock lock(&mu_);
  if (partitioned) {
    partitioned_.insert(cluster);
  } else {
    partitioned_.erase(cluster);
  }
  return absl::OkStatus();
}

bool InMemoryLinkControl::IsPartitioned(const std::string& cluster) const {
  absl::MutexLock lock(&mu_);
  return partitioned_.count(cluster) > 0;
}

absl::Status InMemoryLinkControl::PutVirtualLink(const std::string& id, const std::string&,
                                                 const std::string&, const std::string&) {
  absl::MutexLock lock(&mu_);
  virtual_links_.insert(id);
  return absl::OkStatus();
}

absl::Status InMemoryLinkControl::DeleteVirtualLink(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (virtual_links_.erase(id) == 0) return absl::NotFoundError("no virtual link " + id);
  return absl::OkStatus();
}

size_t InMemoryLinkControl::VirtualLinkCount() const {
  absl::MutexLock lock(&mu_);
  return virtual_links_.size();
}

}  // namespace codeco::codef
