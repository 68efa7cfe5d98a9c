#pragma once
// The KubeApi port over HTTPS (libs/common http_client.h), and where its
// address and credentials come from: a kubeconfig file, or the pod's own
// service account when the adapter runs inside the cluster.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/common/config.h"
#include "codeco/kube/kube_api.h"
#include "codeco/kube/kube_client.h"

namespace codeco::kube {

/// Where kube-apiserver is and how to prove who we are.
struct KubeEndpoint {
  /// Base URL, "https://host:6443" (no trailing '/').
  std::string server;
  /// CA bundle of the server's certificate: a file, or PEM text.
  std::string ca_file;
  std::string ca_pem;
  /// Bearer token, or a file holding it (read again before every call: a
  /// projected service-account token rotates).
  std::string token;
  std::string token_file;
  /// Client certificate and key: files, or PEM text.
  std::string client_cert_file;
  std::string client_key_file;
  std::string client_cert_pem;
  std::string client_key_pem;
  /// Namespace the kubeconfig's context or the service account names ("" = none).
  std::string ns;
};

/// The endpoint of `context` (empty: current-context) in the kubeconfig at
/// `path`. Relative file names are read from the kubeconfig's directory.
/// Refuses what the adapter cannot honour and names the field:
/// insecure-skip-tls-verify, exec and auth-provider plugins, a plain http://
/// server that is not on loopback.
absl::StatusOr<KubeEndpoint> LoadKubeconfig(const std::string& path, const std::string& context);

/// The endpoint of the pod's service account: KUBERNETES_SERVICE_HOST and
/// _PORT, and the token, CA and namespace under `account_dir`
/// (/var/run/secrets/kubernetes.io/serviceaccount).
absl::StatusOr<KubeEndpoint> InClusterEndpoint(
    const std::string& account_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// Adds the keys that say where kube-apiserver is, how to log in to it and
/// how long calls and watches last: kube.kubeconfig, kube.context,
/// kube.service_account_dir, kube.call_timeout and kube.watch_timeout.
void AddKubeConfig(ConfigSchema& schema);

/// The endpoint those keys name: the kubeconfig's context when
/// kube.kubeconfig is set, else the pod's service account.
absl::StatusOr<KubeEndpoint> KubeEndpointFromConfig(const Config& config);

/// The client options those keys give (each timeout 1s-1h, or an error
/// naming the key).
absl::StatusOr<KubeClientOptions> KubeClientOptionsFromConfig(const Config& config);

/// KubeApi over HTTP(S) to one kube-apiserver.
class HttpKubeApi final : public KubeApi {
 public:
  /// Calls `endpoint`; a stream lasts at most `stream_timeout` (longer than
  /// the watches' own timeoutSeconds).
  HttpKubeApi(KubeEndpoint endpoint, absl::Duration stream_timeout);

  absl::StatusOr<KubeAnswer> Call(const std::string& method, const std::string& path,
                                  const std::string& body, absl::Duration timeout) override;
  absl::StatusOr<KubeAnswer> Stream(const std::string& path,
                                    const std::function<bool(std::string_view)>& on_line,
                                    const std::function<bool()>& cancelled) override;

 private:
  KubeEndpoint endpoint_;
  absl::Duration stream_timeout_;
};

/// HttpKubeApi for a KubeClient with `options`: its streams outlive the
/// watches' own timeoutSeconds by a minute.
std::unique_ptr<HttpKubeApi> MakeHttpKubeApi(KubeEndpoint endpoint,
                                             const KubeClientOptions& options);

}  // namespace codeco::kube
