#include "acm/server/policy_bundle_watcher.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/logging.h"

namespace codeco::acm {
namespace {

// The file's bytes, at most `limit` of them; NOT_FOUND when unreadable.
absl::StatusOr<std::string> ReadFile(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::string bytes;
  bytes.resize(limit + 1);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

}  // namespace

PolicyBundleWatcher::PolicyBundleWatcher(AdmissionChain& chain, PolicyBundleFiles files,
                                         absl::Duration interval, std::function<void()> installed)
    : chain_(chain), files_(std::move(files)), installed_(std::move(installed)) {
  Poll();
  thread_ = std::thread([this, interval] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
        mu_.AwaitWithTimeout(absl::Condition(&stop), interval);
        if (stopping_) return;
      }
      if (Poll() && installed_) installed_();
    }
  });
}

PolicyBundleWatcher::~PolicyBundleWatcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status PolicyBundleWatcher::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

bool PolicyBundleWatcher::Poll() {
  const PolicyBundleLimits limits;
  absl::StatusOr<std::string> bundle = ReadFile(files_.bundle, limits.max_bytes);
  absl::StatusOr<std::string> signature = ReadFile(files_.bundle + ".sig", 64 << 10);
  absl::StatusOr<std::string> key = ReadFile(files_.public_key, 64 << 10);
  absl::Status outcome;
  std::string tried;
  if (!bundle.ok() || !signature.ok() || !key.ok()) {
    outcome = !bundle.ok() ? bundle.status() : !signature.ok() ? signature.status() : key.status();
    tried = outcome.ToString();
  } else {
    tried = absl::StrCat(*bundle, "\n--\n", *signature, "\n--\n", *key);
  }
  {
    absl::MutexLock lock(&mu_);
    if (tried == tried_) return false;  // nothing changed since the last try
    tried_ = tried;
  }
  if (outcome.ok()) outcome = InstallSignedBundle(chain_, *bundle, *signature, *key, limits);
  if (outcome.ok()) {
    log::Info("policy bundle installed",
              {{"bundle", files_.bundle}, {"version", chain_.version()}});
  } else {
    log::Warn("policy bundle refused; the one in force stays",
              {{"bundle", files_.bundle},
               {"in_force", chain_.version().empty() ? "(built-in defaults)" : chain_.version()},
               {"error", std::string(outcome.message())}});
  }
  absl::MutexLock lock(&mu_);
  last_ = outcome;
  return outcome.ok();
}

}  // namespace codeco::acm
