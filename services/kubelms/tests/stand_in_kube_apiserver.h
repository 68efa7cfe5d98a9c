#pragma once
// A stand-in kube-apiserver for the Kubernetes LMS adapter's tests: no
// kube-apiserver can run on these machines. It serves, over plain HTTP/1.1 on
// loopback with a bearer token, the part of the v1 API the adapter calls, in
// the shapes kube-apiserver v1.28 answers with: nodes (read from a recorded
// NodeList, testdata/nodes.json), pods in namespaces (created, bound to their
// node, run by a stand-in kubelet, deleted gracefully), lists with
// limit/continue and label and field selectors, chunked watch streams with
// bookmarks and the 410 Expired ERROR event, Status objects for errors,
// metrics.k8s.io samples and the kubelet checkpoint API behind the node
// proxy, and custom resources (CRUD, merge patches, the status subresource,
// generations, finalizers, resourceVersion preconditions). Every JSON document it serves can be
// written out for the schema check (check_kube_json.py).

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace codeco::kubelms::testing {

/// A custom resource the stand-in serves, as an installed
/// CustomResourceDefinition would (namespaced, with a status subresource).
struct CustomResource {
  /// API group ("codeco.io").
  std::string group;
  /// Version ("v1").
  std::string version;
  /// Plural name ("codecoapps").
  std::string plural;
  /// Kind ("CodecoApp").
  std::string kind;
};

/// How the stand-in starts.
struct StandInOptions {
  /// The bearer token it requires ("" = none).
  std::string token = "codeco-test-token";
  /// The recorded NodeList it serves ("" = testdata/nodes.json).
  std::string nodes_file;
  /// Watch events kept; a watch from an older version gets 410 Expired.
  size_t history_limit = 1000;
  /// When set, every JSON document served (and every watch event) is written
  /// into this directory as NNNNN.json.
  std::string dump_dir;
  /// Custom resources served under /apis/<group>/<version>/.
  std::vector<CustomResource> custom_resources;
};

/// A stand-in kube-apiserver on 127.0.0.1. Thread-safe; stops (closing its
/// watches) when destroyed.
class StandInKubeApiServer {
 public:
  /// Starts listening; fails the current Catch2 test when it cannot.
  explicit StandInKubeApiServer(StandInOptions options = {});
  ~StandInKubeApiServer();
  StandInKubeApiServer(const StandInKubeApiServer&) = delete;
  StandInKubeApiServer& operator=(const StandInKubeApiServer&) = delete;

  /// "http://127.0.0.1:PORT".
  std::string Url() const;
  /// The token it requires.
  std::string Token() const;

  /// Sets a node's Ready condition (a MODIFIED node event).
  void SetNodeReady(const std::string& node, bool ready);
  /// The metrics.k8s.io sample of a pod ("250m", "64Mi").
  void SetPodUsage(const std::string& ns, const std::string& pod, const std::string& cpu,
                   const std::string& memory);
  /// Pods with a container of `image` fail with `message` instead of running.
  void SetImageFailure(const std::string& image, const std::string& message);
  /// Forgets the event history (a compaction past every version handed out):
  /// a watch from any earlier version gets the 410 Expired ERROR event.
  void ExpireHistory();
  /// Ends every open watch cleanly (as at kube-apiserver's request timeout).
  void EndWatches();
  /// Sends a BOOKMARK to every watch that asked for them.
  void SendBookmarks();
  /// The next `times` requests of `method` whose path (with query) starts
  /// with `path_prefix` get `http_status` with a Status body.
  void FailNext(const std::string& method, const std::string& path_prefix, int http_status,
                int times);
  /// "METHOD /path?query" of every request, in order.
  std::vector<std::string> Requests() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace codeco::kubelms::testing
