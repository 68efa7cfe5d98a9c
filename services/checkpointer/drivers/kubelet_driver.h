#pragma once
// The checkpoint driver of real Kubernetes nodes: the kubelet's checkpoint
// API (KEP-2008 "Forensic Container Checkpointing", feature gate
// ContainerCheckpoint, beta and on by default since 1.30; the runtime, CRI-O
// or containerd, runs CRIU). A checkpoint is
//
//   POST https://<node>:10250/checkpoint/{namespace}/{pod}/{container}[?timeout=<s>]
//
// with a client certificate the kubelet authorizes for nodes/checkpoint; the
// kubelet answers {"items":["/var/lib/kubelet/checkpoints/checkpoint-<pod>_<ns>-
// <container>-<time>.tar"]}, a path on the node. The checkpointer is a
// node-local agent, so the driver then hard-links (or copies) that archive into
// the dump directory as checkpoint.tar.
//
// Crash-consistent, not fenced: the kubelet checkpoints a running container
// and leaves it running, so writes the container accepts after the dump are
// not in it, and Resume and Retire have nothing to lift or stop (the LMS
// deletes the source pod after a cut-over). Use it where a crash-consistent
// copy is enough or the application is quiesced by other means.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpointer/core/state_driver.h"

namespace codeco::checkpointer {

// Facts the kubelet driver records with each checkpoint (image annotations).
/// The archive's path on the node, as the kubelet reported it.
inline constexpr char kKubeletArchiveFact[] = "org.codeco.kubelet.archive";
/// The archive's digest, "sha256:<64 hex>".
inline constexpr char kKubeletArchiveDigestFact[] = "org.codeco.kubelet.archive.sha256";
/// The node and container checkpointed, "<node>/<namespace>/<pod>/<container>".
inline constexpr char kKubeletSourceFact[] = "org.codeco.kubelet.source";
/// The file the archive is written to inside the dump directory.
inline constexpr char kKubeletArchiveFile[] = "checkpoint.tar";

/// Takes container state through the kubelet checkpoint API.
class KubeletCheckpointDriver final : public StateDriver {
 public:
  /// Options of the driver.
  struct Options {
    /// True when the cluster is a Kubernetes one whose kubelets serve the
    /// checkpoint API; the driver handles nothing otherwise. Default false.
    bool kubernetes = false;
    /// When not empty, the only node this agent runs on: targets on other
    /// nodes are not handled (their archives are not on this disk). Default
    /// empty: any node (the archive directory is shared, or tests).
    std::string local_node;
    /// Kubelet base URL per node name ("node-a" -> "https://10.0.0.5:10250"),
    /// looked up first. Default empty.
    std::map<std::string, std::string> node_urls;
    /// The kubelet base URL of nodes not in `node_urls`; "{node}" is replaced
    /// by the node's name. Default "https://{node}:10250".
    std::string url_template = "https://{node}:10250";
    /// PEM client certificate and key the kubelet authorizes for
    /// nodes/checkpoint (kubeadm: /etc/kubernetes/pki/apiserver-kubelet-client.{crt,key}).
    /// Default empty: no client certificate (the kubelet answers 401).
    std::string client_cert_file;
    /// PEM private key of `client_cert_file`. Default empty.
    std::string client_key_file;
    /// PEM CA bundle that signed the kubelets' serving certificates. Default
    /// empty: the system's bundle.
    std::string ca_file;
    /// Sent as ?timeout=<whole seconds, rounded up> (the runtime's checkpoint
    /// timeout). Default zero: not sent, the kubelet's CRI default applies.
    absl::Duration checkpoint_timeout = absl::ZeroDuration();
    /// Limit of one HTTP exchange with the kubelet; raised to
    /// `checkpoint_timeout` + 30 s when that is longer. Default 5 min.
    absl::Duration request_timeout = absl::Minutes(5);
    /// Prefix under which the node's paths are read: the archive the kubelet
    /// names as /var/lib/kubelet/... is read at `node_root`/var/lib/kubelet/...
    /// (an agent pod mounts the node's /var/lib/kubelet/checkpoints under
    /// /host, say; tests point it at a temporary directory). Default "/".
    std::filesystem::path node_root = "/";
    /// Remove the kubelet's archive once it is in the dump directory (the
    /// kubelet never removes checkpoint archives, and they hold the
    /// container's memory). Default false: it stays where the kubelet wrote it.
    bool remove_kubelet_archive = false;
  };

  /// A driver with `options`.
  explicit KubeletCheckpointDriver(Options options) : options_(std::move(options)) {}

  /// "kubelet".
  std::string name() const override { return "kubelet"; }
  /// True when `options.kubernetes` is set, `target` names a node, pod and
  /// container, and the node is `options.local_node` (when that is set).
  bool Handles(const ContainerTarget& target) const override;
  /// Asks the kubelet of `target.node` to checkpoint the container and puts
  /// the archive into `directory` as checkpoint.tar. Errors name the node and
  /// the container and carry the kubelet's text (cut to 512 bytes): NOT_FOUND
  /// (404: unknown pod or container, or the checkpoint API is off),
  /// UNAUTHENTICATED (401), PERMISSION_DENIED (403), INTERNAL (500: the
  /// runtime failed; or an answer that is not {"items":["<path>"]}),
  /// UNAVAILABLE (the kubelet cannot be reached, 502-504), DEADLINE_EXCEEDED,
  /// FAILED_PRECONDITION (`directory` exists, the archive is not on this
  /// disk, TLS files unusable). Crash-consistent: the container runs on.
  absl::StatusOr<StateDump> Checkpoint(const ContainerTarget& target,
                                       const std::filesystem::path& directory) override;
  /// OK: the kubelet never stopped the container, there is nothing to lift.
  absl::Status Resume(const ContainerTarget& source) override;
  /// OK: the kubelet cannot stop a container; the LMS deletes the source pod.
  /// Writes between the dump and that deletion are lost (crash-consistent).
  absl::Status Retire(const ContainerTarget& source) override;
  /// Checks only what the kubelet can show: `facts` are a kubelet
  /// checkpoint's (INVALID_ARGUMENT otherwise), and the kubelet of
  /// `restored.node` lists the pod with the container running (GET /pods):
  /// NOT_FOUND when the pod or container is not listed, FAILED_PRECONDITION
  /// when it is not running (its state is named). It cannot look inside the
  /// container, so it never compares state and never answers DATA_LOSS.
  absl::Status Verify(const ContainerTarget& restored,
                      const std::map<std::string, std::string>& facts) override;

  /// The kubelet base URL of `node` (from `node_urls`, else `url_template`;
  /// no trailing "/"); INVALID_ARGUMENT when `node` is empty or not a plain
  /// host name, or the URL is not https://.
  absl::StatusOr<std::string> KubeletUrl(const std::string& node) const;

 private:
  Options options_;
};

}  // namespace codeco::checkpointer
