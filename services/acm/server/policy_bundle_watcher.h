#pragma once
// Keeps ACM's admission chain on the policy bundle its files hold
// (docs/policies.md): reads the bundle, its detached signature
// (`<bundle>.sig`) and the public key at start and then every `interval`, and
// whenever the bundle or signature bytes changed installs them through
// InstallSignedBundle. A bundle that fails (bad signature, bad field,
// unreadable file) is logged and leaves the one in force; the same bytes are
// not tried again until they change.

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/admission.h"

namespace codeco::acm {

/// Where the bundle comes from.
struct PolicyBundleFiles {
  /// The bundle (YAML); its signature is read from `bundle + ".sig"`.
  std::string bundle;
  /// PEM Ed25519 public key the signature must verify with.
  std::string public_key;
};

/// Polls the files and installs what changed. Stops with its destructor.
class PolicyBundleWatcher {
 public:
  /// Reads once before returning (so the first apply sees the bundle), then
  /// every `interval` on its own thread. `chain` must outlive the watcher.
  /// `installed`, when set, runs on the watcher's thread after each bundle
  /// installed there (not the first, read by the constructor).
  PolicyBundleWatcher(AdmissionChain& chain, PolicyBundleFiles files, absl::Duration interval,
                      std::function<void()> installed = {});
  ~PolicyBundleWatcher();

  /// The outcome of the last bundle bytes tried (OK: installed).
  absl::Status last() const;
  /// Reads the files now; installs when the bytes changed since the last
  /// try. True when it installed a bundle.
  bool Poll();

 private:
  AdmissionChain& chain_;
  const PolicyBundleFiles files_;
  const std::function<void()> installed_;
  mutable absl::Mutex mu_;
  std::string tried_ ABSL_GUARDED_BY(mu_);  // bundle + signature bytes last tried
  absl::Status last_ ABSL_GUARDED_BY(mu_) = absl::UnavailableError("not read yet");
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::acm
