// deploy_manifests_test: what deploy/ ships (the kustomize base and overlays,
// the image, docker-compose.yml) checked against the binaries this build
// produces. No Kubernetes cluster and no Docker engine run here, so the
// manifests are checked structurally: every object and reference, every
// workload's pods, every Service's targets, every mounted ConfigMap and
// Secret; each service's configuration is handed to its real binary, which
// must start with it; the CodecoApp CRDs must agree with ACM's own parser;
// the compose file's commands must name built binaries, flags they accept and
// addresses something listens on; the Dockerfile must install what
// scripts/install-deps.sh lists and the runtime libraries the binaries load.
// The Kubernetes LMS adapter's and the CodecoApp shim's RBAC must grant
// exactly the API calls they make.
// Where `kubectl` is installed, its built-in kustomize renders each overlay
// and the same checks run on what it renders.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "acm/core/cam_parser.h"
#include "process.h"
#include "yaml-cpp/yaml.h"

namespace {

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::CommandResult;
using codeco::testing::ReadWholeFile;
using codeco::testing::RunCommand;
using codeco::testing::ScratchDir;

const fs::path kSource = CODECO_SOURCE_DIR;
const fs::path kK8s = kSource / "deploy" / "k8s";
// hub-ha is the hub overlay made highly available: ACM and SWM replicated
// on an etcd cluster of its own (docs/deploy.md, "A highly available hub").
const std::vector<std::string> kOverlays = {"hub", "mc", "hub-ha"};

// The role an overlay's services run in (their `role`, the objects'
// codeco.io/role label): hub-ha is a hub.
std::string RoleOf(const std::string& overlay) { return overlay == "mc" ? "mc" : "hub"; }
// Where the image installs the binaries (deploy/docker/Dockerfile).
constexpr char kImageBin[] = "/usr/local/bin/";

// The binaries this build produces, by the name the image installs them under.
const std::map<std::string, std::string>& Binaries() {
  static const std::map<std::string, std::string> kBinaries = {
      // The six services.
      {"codeco-acm", CODECO_ACM_BIN},
      {"codeco-swm", CODECO_SWM_BIN},
      {"codeco-pdlc", CODECO_PDLC_BIN},
      {"codeco-netma", CODECO_NETMA_BIN},
      {"codeco-mdm", CODECO_MDM_BIN},
      {"codeco-checkpointer", CODECO_CHECKPOINTER_BIN},
      // Kubernetes only: the LMS adapter and the CodecoApp shim.
      {"codeco-kubelms", CODECO_KUBELMS_BIN},
      {"codeco-kubeapps", CODECO_KUBEAPPS_BIN},
      // The operator's CLI and the emulator.
      {"codecoctl", CODECOCTL_BIN},
      {"codef", CODEF_BIN},
  };
  return kBinaries;
}

// The services an overlay runs that `codecoctl up` does not, by overlay:
// on the hub the CodecoApp shim, which forwards CodecoApp objects to ACM; on
// a managed cluster the Kubernetes LMS adapter, which stands in for the LMS
// CODEF emulates there.
const std::map<std::string, std::set<std::string>>& KubernetesOnlyServices() {
  static const std::map<std::string, std::set<std::string>> kServices = {
      {"hub", {"kubeapps"}}, {"mc", {"kubelms"}}, {"hub-ha", {"kubeapps"}}};
  return kServices;
}

// The one service of each overlay that calls the Kubernetes API, by overlay:
// its Deployment and its ServiceAccount (in namespace codeco) have this name.
const std::map<std::string, std::string>& KubeApiClients() {
  static const std::map<std::string, std::string> kClients = {
      {"hub", "codeco-kubeapps"}, {"mc", "codeco-kubelms"}, {"hub-ha", "codeco-kubeapps"}};
  return kClients;
}

// The services that keep no state: a Deployment with data_dir (an empty
// RocksDB) on an emptyDir. Every other one is a StatefulSet with a claim.
const std::set<std::string>& StatelessServices() {
  static const std::set<std::string> kServices = {"codeco-kubelms", "codeco-kubeapps"};
  return kServices;
}

// The StatefulSets an overlay runs as several replicas with one leader
// elected through etcd, by overlay (docs/ha.md). They differ from every other
// codeco workload where docs/deploy.md says: more than one replica,
// podManagementPolicy Parallel, updateStrategy OnDelete, state in etcd with
// data_dir on an emptyDir, and startup and liveness probes that ask /metrics
// (a standby binds no gRPC port; it serves /metrics).
const std::set<std::string>& ReplicatedServices(const std::string& overlay) {
  static const std::map<std::string, std::set<std::string>> kReplicated = {
      {"hub-ha", {"codeco-acm", "codeco-swm"}}};
  static const std::set<std::string> kNone;
  auto it = kReplicated.find(overlay);
  return it == kReplicated.end() ? kNone : it->second;
}

// The etcd StatefulSet of an overlay that replicates services, by overlay.
const std::map<std::string, std::string>& EtcdStatefulSets() {
  static const std::map<std::string, std::string> kEtcd = {{"hub-ha", "codeco-etcd"}};
  return kEtcd;
}

// ---------------------------------------------------------------------------
// Small helpers.

// Problems found by a check, reported all at once.
class Problems {
 public:
  // Records `what` found at `where`.
  void Add(const std::string& where, const std::string& what) {
    list_.push_back(where + ": " + what);
  }
  // All of them, one a line.
  std::string Text() const { return absl::StrJoin(list_, "\n"); }
  // True when nothing was found.
  bool empty() const { return list_.empty(); }

 private:
  std::vector<std::string> list_;
};

// Fails the test case with every problem listed.
#define CHECK_NO_PROBLEMS(problems) \
  do {                              \
    INFO((problems).Text());        \
    CHECK((problems).empty());      \
  } while (false)

// The scalar's text, or "" for anything else.
std::string Str(const YAML::Node& node) {
  return node && node.IsScalar() ? node.Scalar() : std::string();
}

// Every non-empty document of a YAML file (throws on a syntax error).
std::vector<YAML::Node> LoadDocs(const fs::path& file) {
  std::vector<YAML::Node> docs;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(file.string())) {
    if (doc && !doc.IsNull()) docs.push_back(doc);
  }
  return docs;
}

// Every file under `dir` whose name ends in one of `extensions`, sorted.
std::vector<fs::path> FilesUnder(const fs::path& dir, std::vector<std::string> extensions) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    for (const std::string& ext : extensions) {
      if (entry.path().extension() == ext) out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `path` relative to the source tree, for messages.
std::string Rel(const fs::path& path) { return fs::relative(path, kSource).string(); }

// True when two YAML trees hold the same data (maps compared by key).
bool SameYaml(const YAML::Node& a, const YAML::Node& b) {
  if (a.Type() != b.Type()) return false;
  switch (a.Type()) {
    case YAML::NodeType::Scalar:
      return a.Scalar() == b.Scalar();
    case YAML::NodeType::Sequence:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!SameYaml(a[i], b[i])) return false;
      }
      return true;
    case YAML::NodeType::Map: {
      if (a.size() != b.size()) return false;
      for (const auto& kv : a) {
        const YAML::Node other = b[kv.first.Scalar()];
        if (!other || !SameYaml(kv.second, other)) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

// SameYaml, for fields that may be absent: true when both are absent.
bool SameField(const YAML::Node& a, const YAML::Node& b) {
  if (!a || !b) return !a && !b;
  return SameYaml(a, b);
}

// True when every label of `selector` is in `labels` (an empty selector
// selects nothing here: every codeco selector names labels).
bool Selects(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector || !selector.IsMap() || selector.size() == 0) return false;
  if (!labels || !labels.IsMap()) return false;
  for (const auto& kv : selector) {
    if (Str(labels[kv.first.Scalar()]) != Str(kv.second)) return false;
  }
  return true;
}

// True when a LabelSelector (matchLabels and matchExpressions' In, NotIn,
// Exists and DoesNotExist) selects `labels`; an empty one selects nothing.
bool SelectorSelects(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector || !selector.IsMap()) return false;
  const YAML::Node& match = selector["matchLabels"];
  const YAML::Node& expressions = selector["matchExpressions"];
  if (!match && !expressions) return false;
  if (match && !Selects(match, labels)) return false;
  for (const YAML::Node& e : expressions) {
    const std::string key = Str(e["key"]);
    const std::string op = Str(e["operator"]);
    const bool has = labels && labels.IsMap() && labels[key];
    bool in = false;
    for (const YAML::Node& v : e["values"]) in = in || (has && Str(labels[key]) == Str(v));
    if ((op == "In" && !in) || (op == "NotIn" && in) || (op == "Exists" && !has) ||
        (op == "DoesNotExist" && has)) {
      return false;
    }
  }
  return true;
}

// The absolute path of program `name` on $PATH (and the sbin directories),
// or "" when there is none: the test's child processes are started without
// a PATH search.
std::string Which(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::string path = env != nullptr ? env : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const fs::path candidate = fs::path(std::string(dir)) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// The `--help` text of a built binary (cached).
const std::string& HelpOf(const std::string& binary) {
  static std::map<std::string, std::string> cache;
  auto it = cache.find(binary);
  if (it != cache.end()) return it->second;
  CommandResult result = RunCommand({Binaries().at(binary), "--help"}, absl::Seconds(30));
  return cache[binary] = result.output;
}

// The flags a binary's `--help` lists ("--tls.ca-file", ...).
std::set<std::string> FlagsOf(const std::string& binary) {
  std::set<std::string> flags;
  static const std::regex kFlag("^\\s+(--[a-z0-9][a-z0-9.-]*)");
  std::istringstream in(HelpOf(binary));
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kFlag)) flags.insert(m[1]);
  }
  return flags;
}

// A config key (`tls.ca_file`) as the flag `--help` lists (`--tls.ca-file`).
std::string FlagOfKey(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

// Every leaf key of a service config, dotted (`tls.ca_file`).
void FlattenKeys(const YAML::Node& node, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& kv : node) {
    const std::string key = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    if (kv.second.IsMap()) {
      FlattenKeys(kv.second, key, out);
    } else {
      out.push_back(key);
    }
  }
}

// The value at `parts[i..]` under `node` ("" when absent).
std::string ValueAt(const YAML::Node& node, const std::vector<std::string>& parts, size_t i) {
  if (i == parts.size()) return Str(node);
  if (!node || !node.IsMap() || !node[parts[i]]) return "";
  return ValueAt(node[parts[i]], parts, i + 1);
}

// The value of a nested config key such as `tls.ca_file` ("" when absent).
std::string ConfigValue(const YAML::Node& config, const std::string& key) {
  return ValueAt(config, absl::StrSplit(key, '.'), 0);
}

// The port of "host:port" ("" when none).
std::string PortOf(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(colon + 1);
}

// True when `path` is `dir` or inside it.
bool Under(const std::string& path, const std::string& dir) {
  const std::string prefix = absl::EndsWith(dir, "/") ? dir : dir + "/";
  return path == dir || absl::StartsWith(path, prefix);
}

// `path` relative to the directory `dir` it lies in, as written.
std::string RelativeTo(const std::string& path, const std::string& dir) {
  return fs::path(path).lexically_relative(dir).string();
}

// "Kind/name" of an object.
std::string Id(const YAML::Node& node) {
  return Str(node["kind"]) + "/" + Str(node["metadata"]["name"]);
}

// ---------------------------------------------------------------------------
// A small model of `kustomize build`: the objects of a kustomization and its
// bases, and the ConfigMaps its generators make. Transformers (namespace,
// labels, images, name suffixes) are not applied; JSON patches are. kubectl's kustomize, where
// installed, cross-checks this model.

// A Kubernetes object and the file it came from.
struct Resource {
  YAML::Node node;
  std::string origin;
};

// A generated ConfigMap: its data by key.
struct GeneratedConfigMap {
  std::map<std::string, std::string> data;
  std::string origin;
};

// What a kustomization builds.
struct Build {
  std::vector<Resource> resources;
  std::map<std::string, GeneratedConfigMap> config_maps;
  std::set<std::string> secrets;  // generated Secrets' names
  Problems problems;
};

// True when `relative` stays inside the kustomization root (kustomize's
// default load restriction for files).
bool InsideRoot(const std::string& relative) {
  fs::path p = fs::path(relative).lexically_normal();
  return !p.empty() && p.is_relative() && *p.begin() != "..";
}

void LoadKustomization(const fs::path& dir, Build& build);

// Reads a generator entry's `files` and `literals` into `data`.
void ReadGeneratorData(const fs::path& dir, const YAML::Node& entry, const std::string& where,
                       std::map<std::string, std::string>& data, Problems& problems) {
  for (const YAML::Node& literal : entry["literals"]) {
    const std::string text = Str(literal);
    size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      problems.Add(where, "literal \"" + text + "\" is not KEY=VALUE");
      continue;
    }
    // A folded multi-line literal keeps its spaces; the services trim the
    // entries of the comma-separated lists they take.
    data[text.substr(0, eq)] = text.substr(eq + 1);
  }
  for (const YAML::Node& file : entry["files"]) {
    const std::string text = Str(file);
    size_t eq = text.find('=');
    const std::string path = eq == std::string::npos ? text : text.substr(eq + 1);
    const std::string key =
        eq == std::string::npos ? fs::path(path).filename().string() : text.substr(0, eq);
    if (!InsideRoot(path)) {
      problems.Add(where, "file " + path + " is outside the kustomization's root");
    } else if (!fs::is_regular_file(dir / path)) {
      problems.Add(where, "no file " + Rel(dir / path));
    } else {
      data[key] = ReadWholeFile(dir / path);
    }
  }
}

// The tokens of an RFC 6901 JSON pointer ("/a/b~1c" -> a, b/c).
std::vector<std::string> PointerTokens(const std::string& pointer) {
  std::vector<std::string> tokens;
  for (absl::string_view part : absl::StrSplit(pointer.substr(1), '/')) {
    std::string token(part);
    for (size_t at = 0; (at = token.find("~1", at)) != std::string::npos; ++at) {
      token.replace(at, 2, "/");
    }
    for (size_t at = 0; (at = token.find("~0", at)) != std::string::npos; ++at) {
      token.replace(at, 2, "~");
    }
    tokens.push_back(token);
  }
  return tokens;
}

// The index a JSON pointer token names in a sequence of `size` items
// (`size` itself for "-" when `append`), or -1.
int SequenceIndex(const std::string& token, size_t size, bool append) {
  if (append && token == "-") return static_cast<int>(size);
  if (token.empty() || !std::all_of(token.begin(), token.end(), ::isdigit)) return -1;
  const size_t index = std::stoul(token);
  return index < size || (append && index == size) ? static_cast<int>(index) : -1;
}

// Applies one RFC 6902 operation (add, remove or replace: what the overlays
// use) to `doc`; "" when it applied, else why not.
std::string ApplyJsonPatchOp(YAML::Node doc, const YAML::Node& op) {
  const std::string kind = Str(op["op"]);
  const std::string path = Str(op["path"]);
  if (kind != "add" && kind != "remove" && kind != "replace") return "op " + kind + " not modelled";
  if (!absl::StartsWith(path, "/")) return "path " + path + " is no JSON pointer";
  const std::vector<std::string> tokens = PointerTokens(path);
  YAML::Node parent = doc;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const YAML::Node& view = parent;
    if (view.IsSequence()) {
      const int index = SequenceIndex(tokens[i], view.size(), false);
      if (index < 0) return path + ": no item " + tokens[i];
      parent.reset(parent[index]);
    } else if (view.IsMap() && view[tokens[i]]) {
      parent.reset(parent[tokens[i]]);
    } else {
      return path + ": no " + tokens[i];
    }
  }
  const std::string& last = tokens.back();
  const YAML::Node& view = parent;
  if (view.IsMap()) {
    if (kind != "add" && !view[last]) return path + ": nothing to " + kind;
    if (kind == "remove") {
      parent.remove(last);
    } else {
      parent[last] = YAML::Clone(op["value"]);
    }
    return "";
  }
  if (!view.IsSequence()) return path + ": the parent is neither a map nor a list";
  const int index = SequenceIndex(last, view.size(), kind == "add");
  if (index < 0) return path + ": no item " + last;
  YAML::Node items(YAML::NodeType::Sequence);
  for (size_t i = 0; i <= view.size(); ++i) {
    if (static_cast<int>(i) == index && kind != "remove") items.push_back(YAML::Clone(op["value"]));
    if (i == view.size()) break;
    if (static_cast<int>(i) == index && kind != "add") continue;
    items.push_back(view[i]);
  }
  // Assigning to a node that exists replaces its content where it is.
  parent = items;
  return "";
}

// Applies a kustomization's `patches` entry to the objects its target
// selects: a file of RFC 6902 operations (the only kind this model applies;
// kubectl's kustomize, where installed, cross-checks the result).
void ApplyPatch(const fs::path& dir, const YAML::Node& patch, const std::string& where,
                Build& build) {
  const std::string name = Str(patch["path"]);
  const YAML::Node target = patch["target"];
  const YAML::Node ops = name.empty() ? YAML::Node() : YAML::LoadFile((dir / name).string());
  if (!target || !ops.IsSequence()) {
    build.problems.Add(where, "patch " + name + " is no JSON patch file with a target");
    return;
  }
  int patched = 0;
  for (Resource& r : build.resources) {
    if (Str(r.node["kind"]) != Str(target["kind"])) continue;
    // kustomize matches a target's name as an anchored regular expression.
    if (target["name"] &&
        !std::regex_match(Str(r.node["metadata"]["name"]), std::regex(Str(target["name"])))) {
      continue;
    }
    ++patched;
    for (const YAML::Node& op : ops) {
      const std::string error = ApplyJsonPatchOp(r.node, op);
      if (!error.empty())
        build.problems.Add(where, "patch " + name + " on " + Id(r.node) + ": " + error);
    }
  }
  if (patched == 0) build.problems.Add(where, "patch " + name + " selects no object");
}

// Loads the kustomization in `dir` (and, recursively, its resources).
void LoadKustomization(const fs::path& dir, Build& build) {
  const fs::path file = dir / "kustomization.yaml";
  const std::string where = Rel(file);
  if (!fs::is_regular_file(file)) {
    build.problems.Add(Rel(dir), "no kustomization.yaml");
    return;
  }
  YAML::Node k = YAML::LoadFile(file.string());
  static const std::set<std::string> kKnown = {
      "apiVersion",      "kind",       "namespace",   "resources",
      "patches",         "labels",     "images",      "configMapGenerator",
      "secretGenerator", "components", "transformers"};
  for (const auto& kv : k) {
    if (!kKnown.contains(kv.first.Scalar())) {
      build.problems.Add(where, "field " + kv.first.Scalar() + " is not one this test models");
    }
  }
  if (Str(k["apiVersion"]) != "kustomize.config.k8s.io/v1beta1" ||
      Str(k["kind"]) != "Kustomization") {
    build.problems.Add(where, "not a kustomize.config.k8s.io/v1beta1 Kustomization");
  }
  for (const YAML::Node& entry : k["resources"]) {
    const fs::path path = dir / Str(entry);
    if (fs::is_directory(path)) {
      LoadKustomization(path, build);
    } else if (!InsideRoot(Str(entry))) {
      build.problems.Add(where, "resource file " + Str(entry) + " is outside the root");
    } else if (!fs::is_regular_file(path)) {
      build.problems.Add(where, "no resource " + Str(entry));
    } else {
      for (const YAML::Node& doc : LoadDocs(path)) build.resources.push_back({doc, Rel(path)});
    }
  }
  for (const YAML::Node& patch : k["patches"]) {
    if (patch["path"] && !fs::is_regular_file(dir / Str(patch["path"]))) {
      build.problems.Add(where, "no patch file " + Str(patch["path"]));
      continue;
    }
    ApplyPatch(dir, patch, where, build);
  }
  for (const YAML::Node& gen : k["configMapGenerator"]) {
    const std::string name = Str(gen["name"]);
    // kustomize's behaviors: create (the default) a new one, replace or
    // merge into one a resource generated.
    const std::string behavior = gen["behavior"] ? Str(gen["behavior"]) : "create";
    const bool exists = build.config_maps.contains(name);
    if (behavior == "create" && exists) {
      build.problems.Add(where, "configMapGenerator " + name + " is generated twice");
    } else if ((behavior == "replace" || behavior == "merge") && !exists) {
      build.problems.Add(where, "configMapGenerator " + name + ": nothing to " + behavior);
    } else if (behavior != "create" && behavior != "replace" && behavior != "merge") {
      build.problems.Add(where, "configMapGenerator " + name + ": behavior " + behavior);
    }
    GeneratedConfigMap& cm = build.config_maps[name];
    if (behavior == "replace") cm.data.clear();
    cm.origin = where;
    ReadGeneratorData(dir, gen, where + " configMapGenerator " + name, cm.data, build.problems);
  }
  for (const YAML::Node& gen : k["secretGenerator"]) build.secrets.insert(Str(gen["name"]));
  for (const YAML::Node& image : k["images"]) {
    if (Str(image["name"]).empty()) build.problems.Add(where, "an images entry without a name");
  }
  // Inline transformer configs: only the namespace one, which sets unset
  // namespaces (objects that name theirs keep them, as this model does).
  for (const YAML::Node& entry : k["transformers"]) {
    const YAML::Node t = entry.IsScalar() ? YAML::Load(entry.Scalar()) : YAML::Node();
    if (Str(t["apiVersion"]) != "builtin" || Str(t["kind"]) != "NamespaceTransformer" ||
        Str(t["unsetOnly"]) != "true" || Str(t["metadata"]["namespace"]).empty()) {
      build.problems.Add(where,
                         "a transformer other than an inline unsetOnly NamespaceTransformer");
    }
  }
}

// The build of overlay `name` (deploy/k8s/overlays/<name>).
const Build& OverlayBuild(const std::string& name) {
  static std::map<std::string, Build> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Build& build = cache[name];
  LoadKustomization(kK8s / "overlays" / name, build);
  return build;
}

// Objects of `kind` in a build.
std::vector<const Resource*> OfKind(const std::vector<Resource>& resources,
                                    const std::string& kind) {
  std::vector<const Resource*> out;
  for (const Resource& r : resources) {
    if (Str(r.node["kind"]) == kind) out.push_back(&r);
  }
  return out;
}

// The kinds that run pods.
bool IsWorkload(const std::string& kind) {
  return kind == "StatefulSet" || kind == "Deployment" || kind == "DaemonSet";
}

// Everything the checks need to know about the objects of one build, whether
// from this test's model or from kubectl's kustomize.
struct ObjectSet {
  std::string name;                 // for messages
  std::string overlay;              // "hub" or "mc"
  std::vector<Resource> resources;  // ConfigMaps included
  std::set<std::string> secrets;    // Secrets defined in the build
};

// The objects of an overlay as this test's model builds them.
ObjectSet ModelObjects(const std::string& overlay) {
  const Build& build = OverlayBuild(overlay);
  ObjectSet set{"overlays/" + overlay, overlay, build.resources, build.secrets};
  for (const auto& [name, cm] : build.config_maps) {
    YAML::Node node;
    node["apiVersion"] = "v1";
    node["kind"] = "ConfigMap";
    node["metadata"]["name"] = name;
    for (const auto& [key, value] : cm.data) node["data"][key] = value;
    set.resources.push_back({node, cm.origin});
  }
  for (const Resource* s : OfKind(set.resources, "Secret")) {
    set.secrets.insert(Str(s->node["metadata"]["name"]));
  }
  return set;
}

// kubectl (for its built-in kustomize), or "" when not installed.
std::string Kubectl() {
  std::string configured = CODECO_KUBECTL;
  if (!configured.empty() && fs::exists(configured)) return configured;
  return "";
}

// The objects of an overlay as kubectl's kustomize renders them (nullopt
// when kubectl is not installed); a render failure is a test failure.
std::optional<ObjectSet> RenderedObjects(const std::string& overlay) {
  if (Kubectl().empty()) return std::nullopt;
  static std::map<std::string, ObjectSet> cache;
  auto it = cache.find(overlay);
  if (it != cache.end()) return it->second;
  CommandResult r = RunCommand({Kubectl(), "kustomize", (kK8s / "overlays" / overlay).string()},
                               absl::Seconds(60));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // kubectl may print warnings on stderr (captured with stdout): keep the YAML.
  ObjectSet set{"kubectl kustomize overlays/" + overlay, overlay, {}, {}};
  for (const YAML::Node& doc : YAML::LoadAll(r.output)) {
    if (doc && doc.IsMap()) set.resources.push_back({doc, set.name});
  }
  for (const Resource* s : OfKind(set.resources, "Secret")) {
    set.secrets.insert(Str(s->node["metadata"]["name"]));
  }
  return cache[overlay] = set;
}

// The sets every structural check runs on: the model's, and kubectl's.
std::vector<ObjectSet> AllObjectSets() {
  std::vector<ObjectSet> sets;
  for (const std::string& overlay : kOverlays) sets.push_back(ModelObjects(overlay));
  if (Kubectl().empty()) {
    WARN("kubectl is not installed: the overlays are checked as this test models kustomize");
  } else {
    for (const std::string& overlay : kOverlays) sets.push_back(*RenderedObjects(overlay));
  }
  return sets;
}

// The pod template spec of a workload.
YAML::Node PodSpec(const YAML::Node& workload) { return workload["spec"]["template"]["spec"]; }

// The object of `kind` named `name` in a set, or null.
const Resource* FindObject(const ObjectSet& set, const std::string& kind, const std::string& name) {
  for (const Resource& r : set.resources) {
    if (Str(r.node["kind"]) == kind && Str(r.node["metadata"]["name"]) == name) return &r;
  }
  return nullptr;
}

// docs/deploy.md, which names the operator-created Secrets and their keys.
const std::string& DeployDoc() {
  static const std::string doc = ReadWholeFile(kSource / "docs" / "deploy.md");
  return doc;
}

// Expands Kubernetes' $(VAR) references in `text` from `env`; unknown ones
// are reported and left as they are.
std::string ExpandVars(const std::string& text, const std::map<std::string, std::string>& env,
                       const std::string& where, Problems& problems) {
  static const std::regex kVar("\\$\\(([A-Za-z_][A-Za-z0-9_]*)\\)");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), kVar);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out += text.substr(last, it->position() - last);
    auto value = env.find((*it)[1]);
    if (value == env.end()) {
      problems.Add(where, "$(" + (*it)[1].str() + ") is not in the container's env");
      out += it->str();
    } else {
      out += value->second;
    }
    last = it->position() + it->length();
  }
  return out + text.substr(last);
}

// A container's env with configMapKeyRef values resolved in `set`.
std::map<std::string, std::string> ContainerEnv(const YAML::Node& container, const ObjectSet& set,
                                                const std::string& where, Problems& problems) {
  std::map<std::string, std::string> env;
  for (const YAML::Node& var : container["env"]) {
    const std::string name = Str(var["name"]);
    if (var["value"]) {
      env[name] = Str(var["value"]);
    } else if (var["valueFrom"]["fieldRef"]) {
      // The downward API: the pod's own name or namespace, known only in
      // the pod ("<metadata.name>" here).
      const std::string field = Str(var["valueFrom"]["fieldRef"]["fieldPath"]);
      if (field != "metadata.name" && field != "metadata.namespace") {
        problems.Add(where, "env " + name + ": fieldRef " + field + " is not modelled");
      }
      env[name] = "<" + field + ">";
    } else if (var["valueFrom"]["configMapKeyRef"]) {
      const YAML::Node ref = var["valueFrom"]["configMapKeyRef"];
      const Resource* cm = FindObject(set, "ConfigMap", Str(ref["name"]));
      if (cm == nullptr) {
        problems.Add(where, "env " + name + ": no ConfigMap " + Str(ref["name"]));
      } else if (!cm->node["data"][Str(ref["key"])]) {
        problems.Add(where, "env " + name + ": ConfigMap " + Str(ref["name"]) + " has no key " +
                                Str(ref["key"]));
      } else {
        env[name] = Str(cm->node["data"][Str(ref["key"])]);
      }
    } else {
      problems.Add(where, "env " + name + ": neither a value nor a configMapKeyRef or fieldRef");
    }
  }
  return env;
}

// What a codeco container runs with, resolved from its pod and the set.
struct ServiceRun {
  std::string where;
  std::string binary;             // "codeco-acm"
  std::string config_text;        // the mounted config file
  YAML::Node config;              // parsed
  std::vector<std::string> args;  // expanded, --config left out
  YAML::Node container;
  YAML::Node pod;
  YAML::Node workload;
};

// The ConfigMap or Secret volume mounted at the directory holding `path`.
YAML::Node VolumeHolding(const YAML::Node& pod, const YAML::Node& container,
                         const std::string& path, std::string* mount_path) {
  for (const YAML::Node& mount : container["volumeMounts"]) {
    if (!Under(path, Str(mount["mountPath"]))) continue;
    for (const YAML::Node& volume : pod["volumes"]) {
      if (Str(volume["name"]) == Str(mount["name"])) {
        if (mount_path != nullptr) *mount_path = Str(mount["mountPath"]);
        return volume;
      }
    }
  }
  return YAML::Node();
}

// Every codeco service container of a set, with its configuration resolved.
std::vector<ServiceRun> ServiceRuns(const ObjectSet& set, Problems& problems) {
  std::vector<ServiceRun> runs;
  for (const Resource& r : set.resources) {
    if (!IsWorkload(Str(r.node["kind"]))) continue;
    const YAML::Node pod = PodSpec(r.node);
    for (const YAML::Node& container : pod["containers"]) {
      ServiceRun run;
      run.where = set.name + " " + Id(r.node) + " " + Str(container["name"]);
      const std::string command = Str(container["command"][0]);
      if (!absl::StartsWith(command, kImageBin)) {
        problems.Add(run.where, "command " + command + " is not a binary of the image");
        continue;
      }
      run.binary = command.substr(strlen(kImageBin));
      if (!absl::StartsWith(run.binary, "codeco-")) continue;
      run.container = container;
      run.pod = pod;
      run.workload = r.node;
      const auto env = ContainerEnv(container, set, run.where, problems);
      for (const YAML::Node& arg : container["args"]) {
        const std::string text = ExpandVars(Str(arg), env, run.where, problems);
        if (absl::StartsWith(text, "--config=")) {
          const std::string path = text.substr(strlen("--config="));
          const YAML::Node volume = VolumeHolding(pod, container, path, nullptr);
          std::string mount;
          VolumeHolding(pod, container, path, &mount);
          const Resource* cm =
              volume ? FindObject(set, "ConfigMap", Str(volume["configMap"]["name"])) : nullptr;
          const std::string key = RelativeTo(path, mount);
          if (cm == nullptr || !cm->node["data"][key]) {
            problems.Add(run.where, "--config " + path + " is in no mounted ConfigMap");
            continue;
          }
          run.config_text = Str(cm->node["data"][key]);
          run.config = YAML::Load(run.config_text);
        } else {
          run.args.push_back(text);
        }
      }
      if (run.config_text.empty()) problems.Add(run.where, "no --config=FILE argument");
      runs.push_back(run);
    }
  }
  return runs;
}

// The services `codecoctl up` starts on the hub (hub = true) or on each
// managed cluster, read from tools/codecoctl/federation_plan.cc.
std::set<std::string> PlannedServices(bool hub) {
  const std::string text = ReadWholeFile(kSource / "tools/codecoctl/federation_plan.cc");
  const std::regex list(std::string(hub ? "HubServices" : "ManagedClusterServices") +
                        "\\(\\)\\s*\\{[^}]*?kServices\\s*=\\s*\\{([^}]*)\\}");
  std::smatch m;
  std::set<std::string> out;
  if (!std::regex_search(text, m, list)) return out;
  static const std::regex quoted("\"([a-z]+)\"");
  const std::string names = m[1];
  for (auto it = std::sregex_iterator(names.begin(), names.end(), quoted);
       it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

// ---------------------------------------------------------------------------
// The manifests.

TEST_CASE("every YAML file under deploy/k8s parses into named objects") {
  Problems problems;
  int objects = 0;
  for (const fs::path& file : FilesUnder(kK8s, {".yaml", ".yml"})) {
    // Service configurations are codeco's own format (checked below), and
    // patches lists of JSON patch operations (applied by the model).
    if (file.parent_path().filename() == "config" || file.parent_path().filename() == "patches") {
      continue;
    }
    std::vector<YAML::Node> docs;
    try {
      docs = LoadDocs(file);
    } catch (const YAML::Exception& e) {
      problems.Add(Rel(file), e.what());
      continue;
    }
    if (docs.empty()) problems.Add(Rel(file), "no document");
    for (const YAML::Node& doc : docs) {
      ++objects;
      if (!doc.IsMap()) {
        problems.Add(Rel(file), "a document that is not a mapping");
        continue;
      }
      if (Str(doc["apiVersion"]).empty()) problems.Add(Rel(file), "an object without apiVersion");
      if (Str(doc["kind"]).empty()) problems.Add(Rel(file), "an object without kind");
      if (file.filename() != "kustomization.yaml" && Str(doc["metadata"]["name"]).empty()) {
        problems.Add(Rel(file), Str(doc["kind"]) + " without metadata.name");
      }
    }
  }
  CHECK(objects > 20);
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("every kustomization names resources patches and files that exist") {
  Problems problems;
  const std::vector<fs::path> all = FilesUnder(kK8s, {".yaml"});
  int kustomizations = 0;
  for (const fs::path& file : all) {
    if (file.filename() != "kustomization.yaml") continue;
    ++kustomizations;
    Build build;
    LoadKustomization(file.parent_path(), build);
    if (!build.problems.empty()) problems.Add(Rel(file), "\n" + build.problems.Text());
  }
  CHECK(kustomizations == 4);
  // Each object once per overlay.
  for (const std::string& overlay : kOverlays) {
    std::set<std::string> seen;
    for (const Resource& r : OverlayBuild(overlay).resources) {
      if (!seen.insert(Id(r.node)).second) problems.Add(overlay, Id(r.node) + " twice");
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("each overlay runs the services codecoctl up starts in its role") {
  for (const std::string& overlay : kOverlays) {
    const std::set<std::string> planned = PlannedServices(RoleOf(overlay) == "hub");
    REQUIRE(planned.size() >= 4);
    std::set<std::string> running;
    for (const Resource& r : OverlayBuild(overlay).resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      for (const YAML::Node& c : PodSpec(r.node)["containers"]) {
        const std::string command = Str(c["command"][0]);
        const std::string prefix = std::string(kImageBin) + "codeco-";
        if (absl::StartsWith(command, prefix)) running.insert(command.substr(prefix.size()));
      }
    }
    std::set<std::string> expected = planned;
    const std::set<std::string>& extra = KubernetesOnlyServices().at(overlay);
    expected.insert(extra.begin(), extra.end());
    INFO("overlay " << overlay);
    CHECK(running == expected);
  }
}

TEST_CASE("workloads select their own pods and run non-root containers with probes") {
  Problems problems;
  for (const ObjectSet& set : AllObjectSets()) {
    for (const Resource& r : set.resources) {
      const std::string kind = Str(r.node["kind"]);
      if (!IsWorkload(kind)) continue;
      const std::string where = set.name + " " + Id(r.node);
      const YAML::Node spec = r.node["spec"];
      if (!Selects(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])) {
        problems.Add(where, "selector.matchLabels does not match the template's labels");
      }
      if (kind == "StatefulSet") {
        if (!FindObject(set, "Service", Str(spec["serviceName"]))) {
          problems.Add(where, "serviceName " + Str(spec["serviceName"]) + " is no Service");
        }
        const std::string name = Str(r.node["metadata"]["name"]);
        const bool replicated = ReplicatedServices(set.overlay).contains(name);
        const bool etcd =
            EtcdStatefulSets().contains(set.overlay) && EtcdStatefulSets().at(set.overlay) == name;
        if (replicated) {
          // A leader and a standby (docs/deploy.md says why two).
          if (Str(spec["replicas"]) != "2") problems.Add(where, "replicated: replicas must be 2");
          // A standby is never Ready: OrderedReady would not create the next
          // pod, a RollingUpdate would stop after the first one.
          if (Str(spec["podManagementPolicy"]) != "Parallel") {
            problems.Add(where, "a standby is never Ready: podManagementPolicy must be Parallel");
          }
          if (Str(spec["updateStrategy"]["type"]) != "OnDelete") {
            problems.Add(where, "a standby is never Ready: updateStrategy must be OnDelete");
          }
          if (spec["volumeClaimTemplates"]) {
            problems.Add(where, "the state is in etcd: no volumeClaimTemplates");
          }
        } else if (etcd) {
          if (Str(spec["replicas"]) != "3") problems.Add(where, "etcd: three members");
          if (Str(spec["podManagementPolicy"]) != "Parallel") {
            problems.Add(where, "etcd's members need each other to be Ready: Parallel");
          }
        } else if (Str(spec["replicas"]) != "1") {
          problems.Add(where, "RocksDB has one writer: replicas must be 1");
        }
      }
      const YAML::Node pod = PodSpec(r.node);
      const YAML::Node pod_security = pod["securityContext"];
      if (!pod["containers"] || pod["containers"].size() == 0) problems.Add(where, "no container");
      for (const YAML::Node& c : pod["containers"]) {
        const std::string cw = where + " container " + Str(c["name"]);
        if (Str(c["image"]).empty()) problems.Add(cw, "no image");
        for (const char* part : {"requests", "limits"}) {
          for (const char* resource : {"cpu", "memory"}) {
            if (Str(c["resources"][part][resource]).empty()) {
              problems.Add(cw, std::string("no resources.") + part + "." + resource);
            }
          }
        }
        for (const char* probe : {"livenessProbe", "readinessProbe"}) {
          if (!c[probe]) problems.Add(cw, std::string("no ") + probe);
        }
        const YAML::Node sc = c["securityContext"];
        const bool non_root = Str(sc["runAsNonRoot"]) == "true" ||
                              (!sc["runAsNonRoot"] && Str(pod_security["runAsNonRoot"]) == "true");
        const std::string uid =
            sc["runAsUser"] ? Str(sc["runAsUser"]) : Str(pod_security["runAsUser"]);
        if (!non_root) problems.Add(cw, "runAsNonRoot is not true");
        if (uid.empty() || uid == "0") problems.Add(cw, "no non-zero runAsUser");
        if (Str(sc["allowPrivilegeEscalation"]) != "false") {
          problems.Add(cw, "allowPrivilegeEscalation is not false");
        }
        if (Str(sc["readOnlyRootFilesystem"]) != "true") {
          problems.Add(cw, "readOnlyRootFilesystem is not true");
        }
        if (Str(sc["capabilities"]["drop"][0]) != "ALL") problems.Add(cw, "capabilities kept");
      }
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("every probe asks the gRPC health service over mTLS with the pod's certificate") {
  // But where docs/deploy.md says otherwise: a replicated service's startup
  // and liveness probes get /metrics, which a standby serves (it binds no
  // gRPC port), and etcd's probes are its own /health.
  Problems problems;
  for (const ObjectSet& set : AllObjectSets()) {
    for (const Resource& r : set.resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      const std::string name = Str(r.node["metadata"]["name"]);
      const bool replicated = ReplicatedServices(set.overlay).contains(name);
      const bool etcd =
          EtcdStatefulSets().contains(set.overlay) && EtcdStatefulSets().at(set.overlay) == name;
      const YAML::Node pod = PodSpec(r.node);
      for (const YAML::Node& c : pod["containers"]) {
        const std::string where = set.name + " " + Id(r.node) + " " + Str(c["name"]);
        std::string grpc_port;
        bool metrics_port = false;
        for (const YAML::Node& port : c["ports"]) {
          if (Str(port["name"]) == "grpc") grpc_port = Str(port["containerPort"]);
          metrics_port = metrics_port || Str(port["name"]) == "metrics";
        }
        for (const char* kind : {"startupProbe", "livenessProbe", "readinessProbe"}) {
          const YAML::Node probe = c[kind];
          const std::string pw = where + " " + kind;
          if (etcd || (replicated && std::string(kind) != "readinessProbe")) {
            // etcd: /health (with its query) on the plaintext metrics port.
            const std::string path = etcd ? "/health" : "/metrics";
            const std::string got = Str(probe["httpGet"]["path"]);
            if (!probe || probe["exec"] || Str(probe["httpGet"]["port"]) != "metrics" ||
                !metrics_port || got.substr(0, got.find('?')) != path) {
              problems.Add(pw, "not an httpGet of " + path + " on the container's metrics port");
            }
            continue;
          }
          if (!probe) continue;
          std::vector<std::string> argv;
          for (const YAML::Node& a : probe["exec"]["command"]) argv.push_back(Str(a));
          // codecoctl health ADDRESS --ca F --cert F --key F [--timeout D]
          if (argv.size() < 9 || argv[0] != std::string(kImageBin) + "codecoctl" ||
              argv[1] != "health") {
            problems.Add(pw, "not `codecoctl health ADDRESS --ca --cert --key`");
            continue;
          }
          if (argv[2] != "127.0.0.1:" + grpc_port) {
            problems.Add(pw, argv[2] + " is not the container's grpc port on 127.0.0.1");
          }
          // The probe's TLS files: keys of a mounted Secret, named in docs/deploy.md.
          for (size_t i = 3; i + 1 < argv.size(); i += 2) {
            const std::string flag = argv[i];
            if (flag == "--timeout") continue;
            if (flag != "--ca" && flag != "--cert" && flag != "--key") {
              problems.Add(pw, "unexpected " + flag);
              continue;
            }
            std::string mount;
            const YAML::Node volume = VolumeHolding(pod, c, argv[i + 1], &mount);
            if (!volume || !volume["secret"]) {
              problems.Add(pw, argv[i + 1] + " is in no mounted Secret");
            } else if (DeployDoc().find(RelativeTo(argv[i + 1], mount)) == std::string::npos) {
              problems.Add(pw, "docs/deploy.md does not name the Secret key of " + argv[i + 1]);
            }
          }
        }
      }
    }
  }
  // codecoctl has the command and the flags the probes use.
  const std::string& help = HelpOf("codecoctl");
  CHECK_THAT(help, Catch::Contains("health [ADDRESS]") && Catch::Contains("--timeout"));
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("every Service selects a workload and targets a port its containers expose") {
  Problems problems;
  for (const ObjectSet& set : AllObjectSets()) {
    for (const Resource* svc : OfKind(set.resources, "Service")) {
      const std::string where = set.name + " " + Id(svc->node);
      std::vector<YAML::Node> containers;
      for (const Resource& r : set.resources) {
        if (!IsWorkload(Str(r.node["kind"]))) continue;
        if (Selects(svc->node["spec"]["selector"],
                    r.node["spec"]["template"]["metadata"]["labels"])) {
          for (const YAML::Node& c : PodSpec(r.node)["containers"]) containers.push_back(c);
        }
      }
      if (containers.empty()) {
        problems.Add(where, "its selector matches no workload's pods");
        continue;
      }
      for (const YAML::Node& port : svc->node["spec"]["ports"]) {
        const std::string target = Str(port["targetPort"]);
        bool found = false;
        for (const YAML::Node& c : containers) {
          for (const YAML::Node& cp : c["ports"]) {
            found = found || Str(cp["name"]) == target || Str(cp["containerPort"]) == target;
          }
        }
        if (!found) problems.Add(where, "targetPort " + target + " is no container port");
      }
    }
    // The PodDisruptionBudgets and NetworkPolicies select pods that exist,
    // no pod is under two budgets, and named ports are container ports.
    std::map<std::string, int> budgets;
    for (const Resource* pdb : OfKind(set.resources, "PodDisruptionBudget")) {
      int matched = 0;
      for (const Resource& r : set.resources) {
        if (IsWorkload(Str(r.node["kind"])) &&
            SelectorSelects(pdb->node["spec"]["selector"],
                            r.node["spec"]["template"]["metadata"]["labels"])) {
          ++matched;
          ++budgets[Id(r.node)];
        }
      }
      if (matched == 0) problems.Add(set.name + " " + Id(pdb->node), "selects no pods");
    }
    for (const auto& [workload, n] : budgets) {
      if (n > 1) problems.Add(set.name + " " + workload, "under more than one budget");
    }
    for (const Resource* np : OfKind(set.resources, "NetworkPolicy")) {
      for (const YAML::Node& rule : np->node["spec"]["ingress"]) {
        for (const YAML::Node& port : rule["ports"]) {
          const std::string name = Str(port["port"]);
          bool found = false;
          for (const Resource& r : set.resources) {
            if (!IsWorkload(Str(r.node["kind"]))) continue;
            for (const YAML::Node& c : PodSpec(r.node)["containers"]) {
              for (const YAML::Node& cp : c["ports"]) found = found || Str(cp["name"]) == name;
            }
          }
          if (!found) problems.Add(set.name + " " + Id(np->node), "port " + name + " is unknown");
        }
      }
    }
    for (const Resource* sm : OfKind(set.resources, "ServiceMonitor")) {
      int matched = 0;
      for (const Resource* svc : OfKind(set.resources, "Service")) {
        if (!Selects(sm->node["spec"]["selector"]["matchLabels"],
                     svc->node["metadata"]["labels"])) {
          continue;
        }
        for (const YAML::Node& endpoint : sm->node["spec"]["endpoints"]) {
          bool has_port = false;
          for (const YAML::Node& p : svc->node["spec"]["ports"]) {
            has_port = has_port || Str(p["name"]) == Str(endpoint["port"]);
          }
          // External Services carry gRPC only; the in-cluster one has metrics.
          if (has_port) ++matched;
        }
      }
      if (matched == 0) problems.Add(set.name + " " + Id(sm->node), "scrapes no Service port");
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("every ConfigMap Secret and volume a pod uses is defined or operator-created") {
  Problems problems;
  for (const ObjectSet& set : AllObjectSets()) {
    for (const Resource& r : set.resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      const std::string where = set.name + " " + Id(r.node);
      const YAML::Node pod = PodSpec(r.node);
      std::set<std::string> volumes;
      for (const YAML::Node& v : pod["volumes"]) {
        volumes.insert(Str(v["name"]));
        if (v["configMap"] && !FindObject(set, "ConfigMap", Str(v["configMap"]["name"]))) {
          problems.Add(where, "no ConfigMap " + Str(v["configMap"]["name"]));
        }
        if (v["secret"]) {
          const std::string name = Str(v["secret"]["secretName"]);
          if (!set.secrets.contains(name) && DeployDoc().find(name) == std::string::npos) {
            problems.Add(where, "Secret " + name + " is neither defined nor in docs/deploy.md");
          }
        }
        if (v["persistentVolumeClaim"]) {
          const std::string claim = Str(v["persistentVolumeClaim"]["claimName"]);
          if (!FindObject(set, "PersistentVolumeClaim", claim)) {
            problems.Add(where, "no PersistentVolumeClaim " + claim);
          }
        }
      }
      for (const YAML::Node& t : r.node["spec"]["volumeClaimTemplates"]) {
        volumes.insert(Str(t["metadata"]["name"]));
      }
      for (const YAML::Node& c : pod["containers"]) {
        for (const YAML::Node& m : c["volumeMounts"]) {
          if (!volumes.contains(Str(m["name"]))) {
            problems.Add(where, "mounts " + Str(m["name"]) + ", which is no volume");
          }
        }
        ContainerEnv(c, set, where, problems);
      }
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("each service config agrees with its pod's ports volumes and certificates") {
  Problems problems;
  for (const ObjectSet& set : AllObjectSets()) {
    for (const ServiceRun& run : ServiceRuns(set, problems)) {
      if (!run.config) continue;
      std::map<std::string, std::string> ports;
      for (const YAML::Node& p : run.container["ports"]) {
        ports[Str(p["name"])] = Str(p["containerPort"]);
      }
      const std::string listen = ConfigValue(run.config, "listen");
      const std::string metrics = ConfigValue(run.config, "metrics_listen");
      if (PortOf(listen) != ports["grpc"]) {
        problems.Add(run.where, "listen " + listen + " is not the grpc port " + ports["grpc"]);
      }
      if (PortOf(metrics) != ports["metrics"]) {
        problems.Add(run.where, "metrics_listen " + metrics + " is not the metrics port");
      }
      if (absl::StartsWith(listen, "127.") || Str(run.config["insecure"]) == "true") {
        problems.Add(run.where, "must serve mTLS on the pod's address");
      }
      // data_dir on the claim's volume (the checkpointer also writes
      // <data_dir>-work beside it); a stateless service's on an emptyDir.
      const std::string data_dir = ConfigValue(run.config, "data_dir");
      const bool stateless = StatelessServices().contains(run.binary);
      // A replicated service keeps its state in etcd: a StatefulSet (stable
      // names) whose data_dir holds scratch files, on an emptyDir.
      const bool replicated =
          ReplicatedServices(set.overlay).contains(Str(run.workload["metadata"]["name"]));
      const std::string kind = Str(run.workload["kind"]);
      if (kind != (stateless ? "Deployment" : "StatefulSet")) {
        problems.Add(run.where, std::string(stateless ? "keeps no state: a Deployment"
                                                      : "keeps state: a StatefulSet") +
                                    ", not a " + kind);
      }
      bool on_volume = false;
      for (const YAML::Node& m : run.container["volumeMounts"]) {
        if (!Under(data_dir, Str(m["mountPath"])) || data_dir == Str(m["mountPath"])) continue;
        if (stateless || replicated) {
          for (const YAML::Node& v : run.pod["volumes"]) {
            on_volume = on_volume || (Str(v["name"]) == Str(m["name"]) && v["emptyDir"]);
          }
          continue;
        }
        for (const YAML::Node& t : run.workload["spec"]["volumeClaimTemplates"]) {
          on_volume = on_volume || Str(t["metadata"]["name"]) == Str(m["name"]);
        }
      }
      if (!on_volume) {
        problems.Add(run.where, "data_dir " + data_dir + " is below no " +
                                    (stateless || replicated ? "emptyDir" : "volumeClaimTemplate"));
      }
      if (ConfigValue(run.config, "role") != RoleOf(set.overlay)) {
        problems.Add(run.where, "role is not " + RoleOf(set.overlay));
      }
      // etcd and leader election exactly for the replicated services, with
      // TLS to etcd from a Secret other than the service's own certificate's
      // (etcd has a CA of its own: docs/deploy.md).
      if ((ConfigValue(run.config, "store.backend") == "etcd") != replicated ||
          (ConfigValue(run.config, "ha.leader_election") == "true") != replicated) {
        problems.Add(run.where, replicated ? "replicated: needs store.backend etcd and "
                                             "ha.leader_election true"
                                           : "one replica: store.backend etcd or "
                                             "ha.leader_election set");
      }
      if (replicated) {
        const YAML::Node own =
            VolumeHolding(run.pod, run.container, ConfigValue(run.config, "tls.ca_file"), nullptr);
        for (const char* key :
             {"store.etcd.ca_file", "store.etcd.cert_file", "store.etcd.key_file"}) {
          const std::string file = ConfigValue(run.config, key);
          const YAML::Node volume = VolumeHolding(run.pod, run.container, file, nullptr);
          if (!volume || !volume["secret"]) {
            problems.Add(run.where, std::string(key) + " " + file + " is in no mounted Secret");
          } else if (own &&
                     Str(volume["secret"]["secretName"]) == Str(own["secret"]["secretName"])) {
            problems.Add(run.where, std::string(key) + " is the service's own certificate's");
          }
        }
      }
      // The TLS files are the probe's: in the pod's Secret.
      std::vector<std::string> probe;
      for (const YAML::Node& a : run.container["readinessProbe"]["exec"]["command"]) {
        probe.push_back(Str(a));
      }
      for (const char* key : {"tls.ca_file", "tls.cert_file", "tls.key_file"}) {
        const std::string file = ConfigValue(run.config, key);
        const YAML::Node volume = VolumeHolding(run.pod, run.container, file, nullptr);
        if (!volume || !volume["secret"]) {
          problems.Add(run.where, std::string(key) + " " + file + " is in no mounted Secret");
        }
        if (std::find(probe.begin(), probe.end(), file) == probe.end()) {
          problems.Add(run.where, std::string(key) + " " + file + " is not what the probe uses");
        }
      }
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

// The flags of a container's args, `--flag=value` by flag.
std::map<std::string, std::string> ArgMap(const YAML::Node& container) {
  std::map<std::string, std::string> out;
  for (const YAML::Node& a : container["args"]) {
    const std::string arg = Str(a);
    const size_t eq = arg.find('=');
    out[arg.substr(0, eq)] = eq == std::string::npos ? "" : arg.substr(eq + 1);
  }
  return out;
}

// The containerPort of the port named `name` ("" when none).
std::string NamedPort(const YAML::Node& container, const std::string& name) {
  for (const YAML::Node& p : container["ports"]) {
    if (Str(p["name"]) == name) return Str(p["containerPort"]);
  }
  return "";
}

TEST_CASE("the replicated services name every etcd member and etcd's initial cluster names each") {
  Problems problems;
  int checked = 0;
  for (const ObjectSet& set : AllObjectSets()) {
    if (!EtcdStatefulSets().contains(set.overlay)) continue;
    ++checked;
    const std::string etcd_name = EtcdStatefulSets().at(set.overlay);
    const Resource* etcd = FindObject(set, "StatefulSet", etcd_name);
    if (etcd == nullptr) {
      problems.Add(set.name, "no StatefulSet " + etcd_name);
      continue;
    }
    const std::string where = set.name + " " + Id(etcd->node);
    const YAML::Node container = PodSpec(etcd->node)["containers"][0];
    const std::string service = Str(etcd->node["spec"]["serviceName"]);
    const int replicas = etcd->node["spec"]["replicas"].as<int>();
    const std::string client_port = NamedPort(container, "client");
    const std::string peer_port = NamedPort(container, "peer");
    // The members' stable names: <statefulset>-<ordinal>.<headless Service>.
    std::vector<std::string> members, clients, peers;
    for (int i = 0; i < replicas; ++i) {
      const std::string member = absl::StrCat(etcd_name, "-", i);
      members.push_back(member);
      clients.push_back(member + "." + service + ":" + client_port);
      peers.push_back(member + "=https://" + member + "." + service + ":" + peer_port);
    }
    // The headless Service publishes them before they are Ready.
    const Resource* headless = FindObject(set, "Service", service);
    if (headless == nullptr || Str(headless->node["spec"]["clusterIP"]) != "None" ||
        Str(headless->node["spec"]["publishNotReadyAddresses"]) != "true") {
      problems.Add(where, "serviceName " + service +
                              " is no headless Service publishing not-ready addresses");
    }
    // etcd's own flags: every member in --initial-cluster, each member's
    // name and URLs its own, mutual TLS to clients and peers.
    const std::map<std::string, std::string> args = ArgMap(container);
    auto arg = [&](const std::string& flag) {
      auto it = args.find(flag);
      return it == args.end() ? std::string("(absent)") : it->second;
    };
    const std::string initial = arg("--initial-cluster");
    std::vector<std::string> listed = absl::StrSplit(initial, ',');
    if (listed != peers) {
      problems.Add(where, "--initial-cluster " + initial + " is not " + absl::StrJoin(peers, ","));
    }
    std::string pod_var;
    for (const YAML::Node& var : container["env"]) {
      if (Str(var["valueFrom"]["fieldRef"]["fieldPath"]) == "metadata.name") {
        pod_var = "$(" + Str(var["name"]) + ")";
      }
    }
    const std::string self = pod_var + "." + service;
    const std::map<std::string, std::string> expected = {
        {"--name", pod_var},
        {"--initial-advertise-peer-urls", "https://" + self + ":" + peer_port},
        {"--advertise-client-urls", "https://" + self + ":" + client_port},
        {"--listen-peer-urls", "https://0.0.0.0:" + peer_port},
        {"--listen-client-urls", "https://0.0.0.0:" + client_port},
        {"--listen-metrics-urls", "http://0.0.0.0:" + NamedPort(container, "metrics")},
        {"--initial-cluster-state", "new"},
        {"--client-cert-auth", "true"},
        {"--peer-client-cert-auth", "true"}};
    for (const auto& [flag, value] : expected) {
      if (pod_var.empty() || arg(flag) != value) {
        problems.Add(where, flag + "=" + arg(flag) + ", not " + value);
      }
    }
    // The TLS files are in a mounted Secret; the data directory on the claim.
    for (const char* flag : {"--trusted-ca-file", "--cert-file", "--key-file",
                             "--peer-trusted-ca-file", "--peer-cert-file", "--peer-key-file"}) {
      const YAML::Node volume = VolumeHolding(PodSpec(etcd->node), container, arg(flag), nullptr);
      if (!volume || !volume["secret"]) {
        problems.Add(where, std::string(flag) + " " + arg(flag) + " is in no mounted Secret");
      }
    }
    bool data_on_claim = false;
    for (const YAML::Node& m : container["volumeMounts"]) {
      if (!Under(arg("--data-dir"), Str(m["mountPath"]))) continue;
      for (const YAML::Node& t : etcd->node["spec"]["volumeClaimTemplates"]) {
        data_on_claim = data_on_claim || Str(t["metadata"]["name"]) == Str(m["name"]);
      }
    }
    if (!data_on_claim) problems.Add(where, "--data-dir is below no volumeClaimTemplate");
    // Each flag one etcd knows. This machine's etcd (Debian's, 3.4) where
    // installed: the image's 3.5 keeps every 3.4 flag.
    if (fs::exists("/usr/bin/etcd")) {
      const std::string help = RunCommand({"/usr/bin/etcd", "--help"}, absl::Seconds(30)).output;
      for (const auto& [flag, value] : args) {
        if (!absl::StrContains(help, flag + " ") && !absl::StrContains(help, flag + "\n") &&
            !absl::StrContains(help, flag + "=")) {
          problems.Add(where, flag + " is not in etcd --help");
        }
      }
    } else {
      WARN("no /usr/bin/etcd: etcd's flags were not checked against its --help");
    }
    // Every replicated service names exactly the members, on the client port.
    int replicated = 0;
    for (const ServiceRun& run : ServiceRuns(set, problems)) {
      const std::string name = Str(run.workload["metadata"]["name"]);
      if (!ReplicatedServices(set.overlay).contains(name)) continue;
      ++replicated;
      const std::string endpoints = ConfigValue(run.config, "store.etcd.endpoints");
      if (endpoints != absl::StrJoin(clients, ",")) {
        problems.Add(run.where, "store.etcd.endpoints " + endpoints + " is not " +
                                    absl::StrJoin(clients, ","));
      }
    }
    if (replicated != static_cast<int>(ReplicatedServices(set.overlay).size())) {
      problems.Add(set.name, "not every replicated service runs");
    }
    // Budgets: etcd's own (one member at a time); none for the replicated
    // services, whose standbys are never Ready (docs/deploy.md).
    for (const Resource& r : set.resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      const std::string name = Str(r.node["metadata"]["name"]);
      const bool replicated_service = ReplicatedServices(set.overlay).contains(name);
      if (!replicated_service && name != etcd_name) continue;
      std::vector<const Resource*> budgets;
      for (const Resource* pdb : OfKind(set.resources, "PodDisruptionBudget")) {
        if (SelectorSelects(pdb->node["spec"]["selector"],
                            r.node["spec"]["template"]["metadata"]["labels"])) {
          budgets.push_back(pdb);
        }
      }
      if (replicated_service && !budgets.empty()) {
        problems.Add(set.name + " " + Id(r.node),
                     "a standby is never Ready: no budget may cover it");
      }
      if (name == etcd_name &&
          (budgets.size() != 1 || Str(budgets[0]->node["spec"]["maxUnavailable"]) != "1")) {
        problems.Add(where, "not under one budget of maxUnavailable 1");
      }
    }
    // NetworkPolicies: the client port admits the replicated services' pods
    // only, the peer port etcd's own.
    const YAML::Node etcd_labels = etcd->node["spec"]["template"]["metadata"]["labels"];
    std::map<std::string, std::set<std::string>> admitted;  // port -> workloads
    for (const Resource* np : OfKind(set.resources, "NetworkPolicy")) {
      if (!SelectorSelects(np->node["spec"]["podSelector"], etcd_labels)) continue;
      for (const YAML::Node& rule : np->node["spec"]["ingress"]) {
        for (const YAML::Node& port : rule["ports"]) {
          for (const Resource& r : set.resources) {
            if (!IsWorkload(Str(r.node["kind"]))) continue;
            bool from = !rule["from"];
            for (const YAML::Node& peer : rule["from"]) {
              from = from || (!peer["namespaceSelector"] && !peer["ipBlock"] &&
                              SelectorSelects(peer["podSelector"],
                                              r.node["spec"]["template"]["metadata"]["labels"]));
            }
            if (from) admitted[Str(port["port"])].insert(Str(r.node["metadata"]["name"]));
          }
        }
      }
    }
    if (admitted["client"] != ReplicatedServices(set.overlay)) {
      problems.Add(where, "its client port admits {" + absl::StrJoin(admitted["client"], ", ") +
                              "}, not the replicated services");
    }
    if (admitted["peer"] != std::set<std::string>{etcd_name}) {
      problems.Add(where, "its peer port admits others than its members");
    }
    INFO(where << " members " << absl::StrJoin(members, ","));
  }
  CHECK(checked >= 1);
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE(
    "a replicated service's config is its overlay's one-replica config plus store and ha keys") {
  // hub-ha's config/<svc>.yaml repeats overlays/hub's: they must not drift.
  Problems problems;
  int checked = 0;
  for (const std::string& overlay : kOverlays) {
    if (ReplicatedServices(overlay).empty()) continue;
    const ObjectSet one = ModelObjects(RoleOf(overlay));
    std::map<std::string, YAML::Node> single;
    for (const ServiceRun& run : ServiceRuns(one, problems)) single[run.binary] = run.config;
    for (const ServiceRun& run : ServiceRuns(ModelObjects(overlay), problems)) {
      if (!ReplicatedServices(overlay).contains(Str(run.workload["metadata"]["name"]))) continue;
      ++checked;
      std::vector<std::string> keys, base_keys;
      FlattenKeys(run.config, "", keys);
      FlattenKeys(single[run.binary], "", base_keys);
      for (const std::string& key : base_keys) {
        if (ConfigValue(run.config, key) != ConfigValue(single[run.binary], key)) {
          problems.Add(run.where, key + " differs from overlays/" + RoleOf(overlay) + "'s");
        }
      }
      for (const std::string& key : keys) {
        const bool added = absl::StartsWith(key, "store.etcd.") || absl::StartsWith(key, "ha.") ||
                           key == "store.backend";
        if (std::find(base_keys.begin(), base_keys.end(), key) == base_keys.end() && !added) {
          problems.Add(run.where, key + " is neither in overlays/" + RoleOf(overlay) +
                                      "'s config nor a store or ha key");
        }
      }
    }
  }
  CHECK(checked == 2);
  CHECK_NO_PROBLEMS(problems);
}

// One permission of an RBAC rule: "apiGroup resource verb" (the group ""
// written "core").
using Grant = std::string;

// Every permission of a Role's or ClusterRole's rules; wildcards, resource
// names and non-resource URLs are problems (codeco grants none).
std::set<Grant> GrantsOf(const YAML::Node& role, const std::string& where, Problems& problems) {
  std::set<Grant> out;
  for (const YAML::Node& rule : role["rules"]) {
    if (rule["nonResourceURLs"]) problems.Add(where, "grants non-resource URLs");
    if (rule["resourceNames"]) problems.Add(where, "names resources (not modelled here)");
    for (const YAML::Node& group : rule["apiGroups"]) {
      for (const YAML::Node& resource : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          for (const std::string& part : {Str(group), Str(resource), Str(verb)}) {
            if (absl::StrContains(part, "*")) problems.Add(where, "a wildcard: " + part);
          }
          const std::string api_group = Str(group).empty() ? "core" : Str(group);
          out.insert(api_group + " " + Str(resource) + " " + Str(verb));
        }
      }
    }
  }
  return out;
}

// A set of grants, for messages.
std::string Describe(const std::set<Grant>& grants) {
  return "{" + absl::StrJoin(grants, ", ") + "}";
}

// What the bindings of a set give the ServiceAccount codeco/<account>.
struct AccountGrants {
  std::set<Grant> cluster;                              // by ClusterRoleBindings
  std::map<std::string, std::set<Grant>> by_namespace;  // by RoleBindings
};

// True when `binding` has the ServiceAccount codeco/<account> as a subject.
bool BindsAccount(const YAML::Node& binding, const std::string& account) {
  for (const YAML::Node& s : binding["subjects"]) {
    if (Str(s["kind"]) == "ServiceAccount" && Str(s["name"]) == account &&
        Str(s["namespace"]) == "codeco") {
      return true;
    }
  }
  return false;
}

// The grants of every binding in `set` that binds codeco/<account>; a binding
// of more subjects, a missing role and a Role of another namespace are
// problems.
AccountGrants GrantsBoundTo(const ObjectSet& set, const std::string& account, Problems& problems) {
  AccountGrants out;
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const Resource* b : OfKind(set.resources, kind)) {
      if (!BindsAccount(b->node, account)) continue;
      const std::string bw = set.name + " " + Id(b->node);
      if (b->node["subjects"].size() != 1) problems.Add(bw, "binds more than " + account);
      const YAML::Node ref = b->node["roleRef"];
      const Resource* role = FindObject(set, Str(ref["kind"]), Str(ref["name"]));
      if (role == nullptr) {
        problems.Add(bw, "no " + Str(ref["kind"]) + " " + Str(ref["name"]));
        continue;
      }
      const std::set<Grant> grants = GrantsOf(role->node, bw, problems);
      if (std::string(kind) == "ClusterRoleBinding") {
        out.cluster.insert(grants.begin(), grants.end());
      } else {
        const std::string binding_ns = Str(b->node["metadata"]["namespace"]);
        if (Str(ref["kind"]) == "Role" && Str(role->node["metadata"]["namespace"]) != binding_ns) {
          problems.Add(bw, "its Role is in another namespace");
        }
        out.by_namespace[binding_ns].insert(grants.begin(), grants.end());
      }
    }
  }
  return out;
}

// The string literals of a source file that start with `prefix`.
std::set<std::string> LiteralsStartingWith(const std::string& source, const std::string& prefix) {
  static const std::regex kLiteral("\"((?:[^\"\\\\\\n]|\\\\.)*)\"");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kLiteral);
       it != std::sregex_iterator(); ++it) {
    if (absl::StartsWith((*it)[1].str(), prefix)) out.insert((*it)[1]);
  }
  return out;
}

TEST_CASE("only each overlay's Kubernetes API client holds a token or a role binding") {
  Problems problems;
  for (const ObjectSet& set : AllObjectSets()) {
    const std::string client = KubeApiClients().at(set.overlay);
    // No wildcard in any role.
    for (const char* kind : {"Role", "ClusterRole"}) {
      for (const Resource* r : OfKind(set.resources, kind)) {
        GrantsOf(r->node, set.name + " " + Id(r->node), problems);
      }
    }
    // Every binding binds the client's ServiceAccount and no one else.
    for (const char* kind : {"RoleBinding", "ClusterRoleBinding"}) {
      for (const Resource* b : OfKind(set.resources, kind)) {
        if (!BindsAccount(b->node, client) || b->node["subjects"].size() != 1) {
          problems.Add(set.name + " " + Id(b->node), "binds someone other than codeco/" + client);
        }
      }
    }
    // The client's pod runs as its own account, with a token.
    const Resource* deployment = FindObject(set, "Deployment", client);
    if (deployment == nullptr) {
      problems.Add(set.name, "no Deployment " + client);
      continue;
    }
    const YAML::Node pod = PodSpec(deployment->node);
    if (Str(pod["serviceAccountName"]) != client) {
      problems.Add(set.name + " " + Id(deployment->node), "does not run as " + client);
    }
    if (Str(pod["automountServiceAccountToken"]) != "true") {
      problems.Add(set.name + " " + Id(deployment->node), "mounts no service-account token");
    }
    if (FindObject(set, "ServiceAccount", client) == nullptr) {
      problems.Add(set.name, "no ServiceAccount " + client);
    }
    // Every other pod runs without a token.
    for (const Resource& r : set.resources) {
      if (IsWorkload(Str(r.node["kind"])) && &r != deployment &&
          Str(PodSpec(r.node)["automountServiceAccountToken"]) != "false") {
        problems.Add(set.name + " " + Id(r.node), "mounts a service-account token");
      }
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("the LMS adapter's RBAC grants exactly the Kubernetes calls it makes") {
  // What services/kubelms/core/kube_lms.cc calls (docs/deploy.md, "The
  // Kubernetes LMS adapter"). Cluster-wide: the nodes (ListNodes, GetNode,
  // WatchNodes), every namespace's pods listed to sum requests per node, the
  // kubelet checkpoint API through the node proxy (POST: create), and a
  // node's metrics (GetNodeUsage).
  const std::set<Grant> cluster_wide = {"core nodes get",   "core nodes list",
                                        "core nodes watch", "core nodes/proxy create",
                                        "core pods list",   "metrics.k8s.io nodes get"};
  // In kube.namespace only: the pods codeco places and their metrics.
  const std::set<Grant> in_namespace = {"core pods get",    "core pods list",
                                        "core pods watch",  "core pods create",
                                        "core pods delete", "metrics.k8s.io pods list"};
  // The API paths the adapter builds: a new one needs a look at the grants
  // above (and at kubelms-rbac.yaml).
  const std::set<std::string> known_paths = {"/api/v1/nodes",
                                             "/api/v1/nodes/",
                                             "/proxy/checkpoint/",
                                             "/api/v1/pods",
                                             "/api/v1/namespaces/",
                                             "/apis/metrics.k8s.io/v1beta1/nodes/",
                                             "/apis/metrics.k8s.io/v1beta1/namespaces/"};
  {
    const std::string source = ReadWholeFile(kSource / "services/kubelms/core/kube_lms.cc");
    static const std::regex kPath("\"(/(?:api|apis|proxy)(?:/[^\"]*)?)\"");
    std::set<std::string> paths;
    for (auto it = std::sregex_iterator(source.begin(), source.end(), kPath);
         it != std::sregex_iterator(); ++it) {
      paths.insert((*it)[1]);
    }
    INFO("the API paths of services/kubelms/core/kube_lms.cc");
    CHECK(paths == known_paths);
  }
  Problems problems;
  int checked = 0;
  for (const ObjectSet& set : AllObjectSets()) {
    if (KubeApiClients().at(set.overlay) != "codeco-kubelms") continue;
    ++checked;
    const std::string where = set.name + " codeco-kubelms";
    // Its kube.namespace, from its configuration.
    std::string ns;
    for (const ServiceRun& run : ServiceRuns(set, problems)) {
      if (run.binary == "codeco-kubelms") ns = ConfigValue(run.config, "kube.namespace");
    }
    REQUIRE_FALSE(ns.empty());
    if (!FindObject(set, "Namespace", ns)) problems.Add(where, "no Namespace " + ns);
    // What the bindings give it, cluster-wide and per namespace.
    AccountGrants granted = GrantsBoundTo(set, "codeco-kubelms", problems);
    if (granted.cluster != cluster_wide) {
      problems.Add(where, "cluster-wide it may " + Describe(granted.cluster) + ", it calls " +
                              Describe(cluster_wide));
    }
    if (granted.by_namespace.size() != 1 || !granted.by_namespace.contains(ns)) {
      problems.Add(where, "is bound in other namespaces than its kube.namespace " + ns);
    }
    if (granted.by_namespace[ns] != in_namespace) {
      problems.Add(where, "in " + ns + " it may " + Describe(granted.by_namespace[ns]) +
                              ", it calls " + Describe(in_namespace));
    }
  }
  CHECK(checked >= 1);
  CHECK_NO_PROBLEMS(problems);
}

// True when one of the NetworkPolicy `policy`'s egress rules admits `port`
// (a number, or the container port's name `port_name`) over `protocol` to a
// peer `admits_peer` accepts (a rule without `to` admits every peer).
bool EgressAdmits(const YAML::Node& policy, const std::string& port, const std::string& port_name,
                  const std::string& protocol,
                  const std::function<bool(const YAML::Node&)>& admits_peer) {
  for (const YAML::Node& rule : policy["spec"]["egress"]) {
    bool port_ok = !rule["ports"];
    for (const YAML::Node& p : rule["ports"]) {
      const std::string proto = p["protocol"] ? Str(p["protocol"]) : "TCP";
      port_ok = port_ok ||
                (proto == protocol &&
                 (Str(p["port"]) == port || (!port_name.empty() && Str(p["port"]) == port_name)));
    }
    bool peer_ok = !rule["to"];
    for (const YAML::Node& peer : rule["to"]) peer_ok = peer_ok || admits_peer(peer);
    if (port_ok && peer_ok) return true;
  }
  return false;
}

TEST_CASE("the CodecoApp shim's RBAC grants exactly the Kubernetes calls it makes") {
  // What services/kubeapps/core/codecoapp_sync.cc calls (docs/deploy.md,
  // "CodecoApp resources"), per CodecoApp resource it follows: the list and
  // watch of GET /apis/{group}/{version}[/namespaces/{ns}]/codecoapps
  // (KubeClient's ListAll and Watch), the merge patch of metadata.finalizers
  // (PATCH .../namespaces/{ns}/codecoapps/{name}) and of the status
  // (PATCH .../codecoapps/{name}/status). Nothing else: no get, create,
  // update or delete.
  auto calls = [](const std::string& group, const std::string& plural) {
    return std::set<Grant>{group + " " + plural + " list", group + " " + plural + " watch",
                           group + " " + plural + " patch", group + " " + plural + "/status patch"};
  };
  const fs::path sync = kSource / "services/kubeapps/core/codecoapp_sync.cc";
  {
    const std::string source = ReadWholeFile(sync);
    INFO("the Kubernetes calls of " << Rel(sync));
    // The KubeClient methods it calls: ListAll, Watch and Send (with PATCH).
    static const std::regex kCall("kube_\\.([A-Za-z]+)\\(");
    std::set<std::string> methods;
    for (auto it = std::sregex_iterator(source.begin(), source.end(), kCall);
         it != std::sregex_iterator(); ++it) {
      methods.insert((*it)[1]);
    }
    std::set<std::string> api_calls;
    for (const char* method : {"Send", "Get", "ListAll", "Watch"}) {
      if (methods.contains(method)) api_calls.insert(method);
    }
    CHECK(api_calls == std::set<std::string>{"ListAll", "Watch", "Send"});
    CHECK_FALSE(methods.contains("api"));
    static const std::regex kSend("kube_\\.Send\\(\\s*\"([A-Z]+)\"");
    std::set<std::string> verbs;
    for (auto it = std::sregex_iterator(source.begin(), source.end(), kSend);
         it != std::sregex_iterator(); ++it) {
      verbs.insert((*it)[1]);
    }
    CHECK(verbs == std::set<std::string>{"PATCH"});
    // The path pieces it builds: /apis/{group}/{version}, /namespaces/{ns},
    // /{plural}, /{name}, /status ("/delete" ends an ACM request id). A new
    // one needs a look at the grants (and at kubeapps-rbac.yaml).
    CHECK(LiteralsStartingWith(source, "/") ==
          std::set<std::string>{"/", "/apis/", "/namespaces/", "/status", "/delete"});
    CHECK_THAT(source, Catch::Contains("ObjectPath(key) + \"/status\""));
    // The resources it follows by default (DefaultCodecoAppResources): the
    // CRDs' groups and versions, plural codecoapps.
    static const std::regex kResource(
        "\\{\\s*\"([a-z0-9.-]+)\",\\s*\"([a-z0-9]+)\",\\s*\"([a-z]+)\"\\s*\\}");
    std::set<std::string> defaults;
    for (auto it = std::sregex_iterator(source.begin(), source.end(), kResource);
         it != std::sregex_iterator(); ++it) {
      defaults.insert(absl::StrCat((*it)[1].str(), "/", (*it)[2].str(), "/", (*it)[3].str()));
    }
    CHECK(defaults == std::set<std::string>{"codeco.io/v1/codecoapps",
                                            "codeco.he-codeco.eu/v1alpha1/codecoapps"});
  }
  const std::set<Grant> expected = [&] {
    std::set<Grant> out = calls("codeco.io", "codecoapps");
    const std::set<Grant> other = calls("codeco.he-codeco.eu", "codecoapps");
    out.insert(other.begin(), other.end());
    return out;
  }();
  Problems problems;
  int checked = 0;
  for (const ObjectSet& set : AllObjectSets()) {
    if (KubeApiClients().at(set.overlay) != "codeco-kubeapps") continue;
    ++checked;
    const std::string where = set.name + " codeco-kubeapps";
    std::optional<ServiceRun> shim;
    for (const ServiceRun& run : ServiceRuns(set, problems)) {
      if (run.binary == "codeco-kubeapps") shim = run;
    }
    REQUIRE(shim.has_value());
    // Every namespace's objects: so a ClusterRole, and no Role.
    if (!ConfigValue(shim->config, "kube.namespace").empty()) {
      problems.Add(where, "kube.namespace is set: the ClusterRole would grant more than it needs");
    }
    // The resources it follows (the config's, else the default) are the
    // CRDs of the overlay, and the grants are those calls on each.
    std::string resources = ConfigValue(shim->config, "kube.resources");
    if (resources.empty()) resources = "codeco.io/v1,codeco.he-codeco.eu/v1alpha1";
    std::set<Grant> needed;
    for (absl::string_view text : absl::StrSplit(resources, ',', absl::SkipWhitespace())) {
      std::vector<std::string> parts = absl::StrSplit(absl::StripAsciiWhitespace(text), '/');
      REQUIRE((parts.size() == 2 || parts.size() == 3));
      const std::string plural = parts.size() == 3 ? parts[2] : "codecoapps";
      const Resource* crd = FindObject(set, "CustomResourceDefinition", plural + "." + parts[0]);
      bool served = false;
      if (crd != nullptr) {
        for (const YAML::Node& v : crd->node["spec"]["versions"]) {
          served = served || (Str(v["name"]) == parts[1] && Str(v["served"]) == "true" &&
                              v["subresources"]["status"]);
        }
      }
      if (!served) {
        problems.Add(where, "kube.resources names " + std::string(text) +
                                ", which no CRD of the overlay serves with a status subresource");
      }
      const std::set<Grant> c = calls(parts[0], plural);
      needed.insert(c.begin(), c.end());
    }
    if (needed != expected) {
      problems.Add(where, "follows " + resources + ", not the two CodecoApp resources");
    }
    AccountGrants granted = GrantsBoundTo(set, "codeco-kubeapps", problems);
    if (granted.cluster != expected) {
      problems.Add(where, "cluster-wide it may " + Describe(granted.cluster) + ", it calls " +
                              Describe(expected));
    }
    if (!granted.by_namespace.empty()) problems.Add(where, "is bound by a RoleBinding");
    // Its egress: kube-apiserver (TCP 443 and 6443), DNS, and the ACM of
    // federation.hub_acm on the port that ACM's Service targets.
    const Resource* policy = nullptr;
    const YAML::Node labels = shim->workload["spec"]["template"]["metadata"]["labels"];
    for (const Resource* np : OfKind(set.resources, "NetworkPolicy")) {
      bool egress = false;
      for (const YAML::Node& t : np->node["spec"]["policyTypes"]) egress |= Str(t) == "Egress";
      if (egress && Selects(np->node["spec"]["podSelector"]["matchLabels"], labels)) {
        policy = np;
      }
    }
    if (policy == nullptr) {
      problems.Add(where, "no egress NetworkPolicy selects its pods");
      continue;
    }
    auto any_address = [](const YAML::Node& peer) { return static_cast<bool>(peer["ipBlock"]); };
    for (const char* port : {"443", "6443"}) {
      if (!EgressAdmits(policy->node, port, "", "TCP", any_address)) {
        problems.Add(where, std::string("egress to kube-apiserver's TCP ") + port + " is denied");
      }
    }
    for (const char* protocol : {"UDP", "TCP"}) {
      if (!EgressAdmits(policy->node, "53", "", protocol, [](const YAML::Node&) { return true; })) {
        problems.Add(where, std::string("egress to DNS (") + protocol + " 53) is denied");
      }
    }
    const std::string hub_acm = ConfigValue(shim->config, "federation.hub_acm");
    const std::string acm_service = hub_acm.substr(0, hub_acm.rfind(':'));
    const Resource* service = FindObject(set, "Service", acm_service);
    if (service == nullptr) {
      problems.Add(where, "federation.hub_acm " + hub_acm + " is no Service of the overlay");
      continue;
    }
    std::string target;
    for (const YAML::Node& p : service->node["spec"]["ports"]) {
      if (Str(p["port"]) == PortOf(hub_acm)) target = Str(p["targetPort"]);
    }
    bool admitted = false;
    int acm_pods = 0;
    for (const Resource& r : set.resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      const YAML::Node pod_labels = r.node["spec"]["template"]["metadata"]["labels"];
      if (!Selects(service->node["spec"]["selector"], pod_labels)) continue;
      ++acm_pods;
      if (Str(PodSpec(r.node)["containers"][0]["command"][0]) !=
          std::string(kImageBin) + "codeco-acm") {
        problems.Add(where, "federation.hub_acm " + hub_acm + " is not ACM's Service");
      }
      for (const YAML::Node& cp : PodSpec(r.node)["containers"][0]["ports"]) {
        if (Str(cp["name"]) != target && Str(cp["containerPort"]) != target) continue;
        admitted = admitted ||
                   EgressAdmits(policy->node, Str(cp["containerPort"]), Str(cp["name"]), "TCP",
                                [&](const YAML::Node& peer) {
                                  return !peer["namespaceSelector"] && !peer["ipBlock"] &&
                                         Selects(peer["podSelector"]["matchLabels"], pod_labels);
                                });
      }
    }
    if (acm_pods != 1) problems.Add(where, "federation.hub_acm " + hub_acm + " selects no ACM");
    if (!admitted) problems.Add(where, "egress to the ACM pods of " + hub_acm + " is denied");
  }
  CHECK(checked >= 1);
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("each service config and flag is one its binary lists in --help") {
  Problems problems;
  int checked = 0;
  for (const std::string& overlay : kOverlays) {
    for (const ServiceRun& run : ServiceRuns(ModelObjects(overlay), problems)) {
      const std::set<std::string> flags = FlagsOf(run.binary);
      REQUIRE(flags.contains("--data-dir"));
      std::vector<std::string> keys;
      FlattenKeys(run.config, "", keys);
      for (const std::string& key : keys) {
        ++checked;
        if (!flags.contains(FlagOfKey(key))) {
          problems.Add(run.where, "config key " + key + " is not in " + run.binary + " --help");
        }
      }
      for (const std::string& arg : run.args) {
        const std::string flag = arg.substr(0, arg.find('='));
        if (!flags.contains(flag)) problems.Add(run.where, flag + " is not in --help");
      }
    }
  }
  CHECK(checked > 50);
  CHECK_NO_PROBLEMS(problems);
}

// The value of `--flag=value` in `args` ("" when absent).
std::string ArgValue(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& arg : args) {
    if (absl::StartsWith(arg, flag + "=")) return arg.substr(flag.size() + 1);
  }
  return "";
}

// True when processes may be started in a network namespace of their own
// (root, util-linux's unshare, iproute2): nothing they try reaches past it.
bool CanIsolateNetwork() {
  static const bool can = [] {
    if (Which("ip").empty() || Which("unshare").empty() || Which("true").empty() ||
        Which("bash").empty() || Which("openssl").empty()) {
      return false;
    }
    return RunCommand({Which("unshare"), "--net", Which("true")}, absl::Seconds(10)).exit_code == 0;
  }();
  return can;
}

TEST_CASE("each service starts with its overlay config and flags") {
  if (!CanIsolateNetwork()) {
    WARN(
        "cannot start processes in a network namespace of their own (needs root, unshare, "
        "ip, bash and openssl): the services' configurations were checked against --help only");
    return;
  }
  const std::string ip = Which("ip");
  const std::string dev_ca = (kSource / "scripts/dev-ca.sh").string();
  ScratchDir scratch("deploy-manifests-start");
  const fs::path certs = scratch.path / "certs";
  auto run_dev_ca = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {Which("bash"), dev_ca, certs.string()});
    CommandResult r = RunCommand(args, absl::Seconds(60));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  };
  run_dev_ca({"ca"});
  // A replicated service needs etcd: a one-member etcd (this machine's,
  // Debian's etcd-server) in the service's own network namespace, with
  // client-certificate TLS from a CA of its own, as the overlay's etcd has.
  const fs::path etcd_certs = scratch.path / "etcd-certs";
  const bool have_etcd = fs::exists("/usr/bin/etcd");
  if (have_etcd) {
    for (std::vector<std::string> args :
         {std::vector<std::string>{"ca"}, std::vector<std::string>{"issue", "hub", "etcd"},
          std::vector<std::string>{"issue", "hub", "client"}}) {
      args.insert(args.begin(), {Which("bash"), dev_ca, etcd_certs.string()});
      CommandResult r = RunCommand(args, absl::Seconds(60));
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
    }
  } else {
    WARN("no /usr/bin/etcd (Debian's etcd-server): the replicated services were not started");
  }
  // All at once (each in a namespace of its own), then stopped together:
  // a service takes about 2 s to exit after SIGTERM.
  struct Started {
    ServiceRun run;
    fs::path err;
    std::unique_ptr<ChildProcess> child;
    bool listening = false;
    bool replicated = false;
    fs::path etcd_pid;  // where the shell wrote its etcd's pid
  };
  std::vector<Started> children;
  Problems problems;
  for (const std::string& overlay : kOverlays) {
    for (const ServiceRun& run : ServiceRuns(ModelObjects(overlay), problems)) {
      const bool replicated =
          ReplicatedServices(overlay).contains(Str(run.workload["metadata"]["name"]));
      if (replicated && !have_etcd) continue;
      const std::string name = overlay + "-" + run.binary;
      const fs::path config = scratch.path / (name + ".yaml");
      std::ofstream(config) << run.config_text;
      // The pod's config and flags; then only what a pod has and this
      // machine has not: a data directory and certificates (the pod's are
      // the operator's Secret; these are scripts/dev-ca.sh's for the same
      // SPIFFE id). Plaintext is no option: the services refuse it towards
      // any address but loopback. In a network namespace that has loopback
      // only, so the pod's addresses (0.0.0.0:7000, ...) are free and the
      // addresses the configuration names (other clusters, the LMS,
      // Prometheus) are never reached.
      const std::string cluster = ArgValue(run.args, "--cluster");
      const std::string service = run.binary.substr(strlen("codeco-"));
      run_dev_ca({"issue", cluster, service});
      const std::string identity = (certs / cluster / service).string();
      // The Kubernetes LMS adapter and the CodecoApp shim also find
      // kube-apiserver as a pod does: KUBERNETES_SERVICE_HOST/_PORT and the
      // service account's files (a made-up token and CA). The adapter calls
      // kube-apiserver only when asked; the shim lists CodecoApps at once,
      // is refused (nothing listens on port 9) and keeps trying, as it would
      // while a real one is unreachable: it serves health all the same.
      std::string env;
      std::vector<std::string> pod_has;
      if (run.binary == KubeApiClients().at(overlay)) {
        const fs::path account = scratch.path / (name + "-serviceaccount");
        fs::create_directories(account);
        std::ofstream(account / "token") << "not-a-real-token\n";
        std::ofstream(account / "ca.crt") << ReadWholeFile(certs / "ca.crt");
        std::ofstream(account / "namespace") << "codeco\n";
        env = "KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=9 ";
        pod_has = {"--kube.service-account-dir", account.string()};
      }
      // A replicated service's etcd: the pod's endpoints and etcd TLS files
      // replaced by this one's on loopback (plaintext to etcd is refused
      // anywhere else), started before the service, which retries etcd
      // for store.etcd.timeout. The shell leaves its pid for the test to stop.
      std::string etcd;
      const fs::path etcd_pid = scratch.path / (name + "-etcd.pid");
      if (replicated) {
        const std::string tls = (etcd_certs / "hub" / "etcd").string();
        etcd = absl::StrJoin(
                   {std::string("/usr/bin/etcd"), std::string("--name=m"),
                    "--data-dir=" + (scratch.path / (name + "-etcd")).string(),
                    std::string("--listen-client-urls=https://127.0.0.1:2379"),
                    std::string("--advertise-client-urls=https://127.0.0.1:2379"),
                    std::string("--listen-peer-urls=http://127.0.0.1:2380"),
                    std::string("--initial-advertise-peer-urls=http://127.0.0.1:2380"),
                    std::string("--initial-cluster=m=http://127.0.0.1:2380"),
                    std::string("--client-cert-auth=true"),
                    "--trusted-ca-file=" + (etcd_certs / "ca.crt").string(),
                    "--cert-file=" + tls + ".crt", "--key-file=" + tls + ".key",
                    std::string("--max-txn-ops=4096"), std::string("--max-request-bytes=8388608")},
                   " ") +
               " >" + (scratch.path / (name + "-etcd.log")).string() + " 2>&1 & echo $! >" +
               etcd_pid.string() + " && ";
        const std::string client = (etcd_certs / "hub" / "client").string();
        // Then wait (up to a minute: a loaded machine starts etcd slowly)
        // until it answers, so the service's own etcd timeout is not spent
        // on etcd's start.
        absl::StrAppend(&etcd, "i=0; until ETCDCTL_API=3 /usr/bin/etcdctl",
                        " --endpoints=https://127.0.0.1:2379 --cacert=",
                        (etcd_certs / "ca.crt").string(), " --cert=", client, ".crt --key=", client,
                        ".key endpoint health >/dev/null 2>&1; do i=$((i+1)); ",
                        "[ $i -ge 600 ] && break; sleep 0.1; done; ");
        pod_has.insert(pod_has.end(),
                       {"--store.etcd.endpoints", "127.0.0.1:2379", "--store.etcd.ca-file",
                        (etcd_certs / "ca.crt").string(), "--store.etcd.cert-file", client + ".crt",
                        "--store.etcd.key-file", client + ".key"});
      }
      std::vector<std::string> argv = {
          Which("unshare"),
          "--net",
          "/bin/sh",
          "-c",
          ip + " link set lo up && " + etcd + env + "exec \"$0\" \"$@\"",
          Binaries().at(run.binary),
          "--config",
          config.string()};
      argv.insert(argv.end(), run.args.begin(), run.args.end());
      argv.insert(argv.end(), {"--data-dir", (scratch.path / name).string(), "--tls.ca-file",
                               (certs / "ca.crt").string(), "--tls.cert-file", identity + ".crt",
                               "--tls.key-file", identity + ".key"});
      argv.insert(argv.end(), pod_has.begin(), pod_has.end());
      const fs::path err = scratch.path / (name + ".err");
      children.push_back({run, err, std::make_unique<ChildProcess>(argv, err.string()), false,
                          replicated, replicated ? etcd_pid : fs::path()});
    }
  }
  int started = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (Started& s : children) {
    while (auto line = s.child->ReadLine(deadline)) {
      if (line->find("listening on") != std::string::npos) {
        s.listening = true;
        // A replicated service leads (the only replica) on etcd.
        if (s.replicated && line->find("data=etcd:") == std::string::npos) {
          problems.Add(s.run.where, "does not keep its state in etcd: " + *line);
        }
        if (s.replicated && line->find(" leader") == std::string::npos) {
          problems.Add(s.run.where, "does not lead: " + *line);
        }
        break;
      }
    }
    if (s.listening) {
      ++started;
      kill(s.child->pid(), SIGTERM);
    } else {
      problems.Add(s.run.where, "did not start:\n" + ReadWholeFile(s.err));
    }
  }
  for (Started& s : children) {
    // Signal 0: only wait for the exit SIGTERM started.
    std::optional<int> code = s.child->Stop(0, absl::Now() + absl::Seconds(30));
    if (s.listening && code != 0) {
      problems.Add(s.run.where, "exit code " + std::to_string(code.value_or(-1)) +
                                    " after SIGTERM:\n" + ReadWholeFile(s.err));
    }
    // Then its etcd, which outlived the shell (its parent): SIGKILL, and a
    // wait (bounded) for it to be gone before the scratch directory goes.
    if (s.replicated && fs::exists(s.etcd_pid)) {
      const pid_t pid = std::stoi(ReadWholeFile(s.etcd_pid));
      kill(pid, SIGKILL);
      for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
           kill(pid, 0) == 0 && absl::Now() < give_up;) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
  }
  // hub 5, mc 7, hub-ha 5 (its ACM and SWM only with etcd).
  CHECK(started == (have_etcd ? 17 : 15));
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("the PrometheusRule carries exactly the recording rules of deploy/prometheus") {
  const YAML::Node file = YAML::LoadFile((kSource / "deploy/prometheus/codeco-rules.yml").string());
  const std::vector<YAML::Node> docs = LoadDocs(kK8s / "base" / "prometheusrule.yaml");
  REQUIRE(docs.size() == 1);
  CHECK(Str(docs[0]["apiVersion"]) == "monitoring.coreos.com/v1");
  CHECK(Str(docs[0]["kind"]) == "PrometheusRule");
  REQUIRE(file["groups"].size() > 0);
  INFO(
      "copy the groups of deploy/prometheus/codeco-rules.yml into "
      "deploy/k8s/base/prometheusrule.yaml");
  CHECK(SameYaml(docs[0]["spec"]["groups"], file["groups"]));
  // And the base deploys it.
  bool listed = false;
  for (const YAML::Node& r :
       YAML::LoadFile((kK8s / "base/kustomization.yaml").string())["resources"]) {
    listed = listed || Str(r) == "prometheusrule.yaml";
  }
  CHECK(listed);
}

// ---------------------------------------------------------------------------
// The CodecoApp CRDs against ACM's parser.

// A plain YAML scalar's type under the YAML 1.2 core schema, as Kubernetes
// reads it ("string" for quoted scalars, tagged "!"; plain ones read from a
// file are tagged "?", those a test builds are untagged).
std::string ScalarType(const YAML::Node& node) {
  if (node.Tag() == "!") return "string";
  const std::string& s = node.Scalar();
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (std::regex_match(s, kInt)) return "integer";
  if (std::regex_match(s, kFloat)) return "number";
  if (s == "true" || s == "false" || s == "True" || s == "False") return "boolean";
  if (s == "null" || s == "~" || s.empty()) return "null";
  return "string";
}

// Validates `value` against a CRD's OpenAPI v3 schema as the API server does
// with strict field validation (unknown fields are errors).
void ValidateSchema(const YAML::Node& schema, const YAML::Node& value, const std::string& path,
                    std::vector<std::string>& errors) {
  auto error = [&](const std::string& what) { errors.push_back(path + ": " + what); };
  const bool preserve = Str(schema["x-kubernetes-preserve-unknown-fields"]) == "true";
  if (Str(schema["x-kubernetes-int-or-string"]) == "true") {
    if (!value.IsScalar() || (ScalarType(value) != "integer" && ScalarType(value) != "string")) {
      error("must be an integer or a string");
    }
    return;
  }
  const std::string type = Str(schema["type"]);
  if (type == "object") {
    if (!value.IsMap()) return error("must be an object");
    for (const YAML::Node& req : schema["required"]) {
      if (!value[Str(req)]) error("missing required field " + Str(req));
    }
    for (const auto& kv : value) {
      const std::string key = kv.first.Scalar();
      const std::string child = path + "." + key;
      if (schema["properties"] && schema["properties"][key]) {
        ValidateSchema(schema["properties"][key], kv.second, child, errors);
      } else if (schema["additionalProperties"] && schema["additionalProperties"].IsMap()) {
        ValidateSchema(schema["additionalProperties"], kv.second, child, errors);
      } else if (!preserve && (schema["properties"] || schema["additionalProperties"])) {
        errors.push_back(child + ": unknown field");
      }
    }
  } else if (type == "array") {
    if (!value.IsSequence()) return error("must be an array");
    if (schema["minItems"] && static_cast<int>(value.size()) < schema["minItems"].as<int>()) {
      error("fewer than " + Str(schema["minItems"]) + " items");
    }
    for (size_t i = 0; i < value.size(); ++i) {
      ValidateSchema(schema["items"], value[i], path + "[" + std::to_string(i) + "]", errors);
    }
  } else if (type == "string") {
    if (!value.IsScalar() || ScalarType(value) != "string") return error("must be a string");
    if (schema["enum"]) {
      bool found = false;
      for (const YAML::Node& e : schema["enum"]) found = found || Str(e) == value.Scalar();
      if (!found) error("\"" + value.Scalar() + "\" is not in the enum");
    }
    if (schema["pattern"] &&
        !std::regex_search(value.Scalar(), std::regex(Str(schema["pattern"])))) {
      error("\"" + value.Scalar() + "\" does not match " + Str(schema["pattern"]));
    }
  } else if (type == "integer" || type == "number") {
    const std::string t = value.IsScalar() ? ScalarType(value) : "";
    if (t != "integer" && (type == "integer" || t != "number")) return error("must be a " + type);
    const double v = value.as<double>();
    if (schema["minimum"] && v < schema["minimum"].as<double>()) error("below the minimum");
    if (schema["maximum"] && v > schema["maximum"].as<double>()) error("above the maximum");
  } else if (type == "boolean") {
    if (!value.IsScalar() || ScalarType(value) != "boolean") error("must be a boolean");
  } else if (!preserve) {
    error("schema without a type");
  }
}

// Every schema node has a type, or is int-or-string or free-form (a
// structural schema, which apiextensions.k8s.io/v1 requires).
void CheckStructural(const YAML::Node& schema, const std::string& path, Problems& problems) {
  if (Str(schema["type"]).empty() && Str(schema["x-kubernetes-int-or-string"]) != "true" &&
      Str(schema["x-kubernetes-preserve-unknown-fields"]) != "true") {
    problems.Add(path, "no type");
  }
  for (const auto& kv : schema["properties"]) {
    CheckStructural(kv.second, path + "." + kv.first.Scalar(), problems);
  }
  if (schema["items"]) CheckStructural(schema["items"], path + "[]", problems);
  if (schema["additionalProperties"] && schema["additionalProperties"].IsMap()) {
    CheckStructural(schema["additionalProperties"], path + "{}", problems);
  }
}

// The CRD schemas by apiVersion ("group/version").
std::map<std::string, YAML::Node> CodecoAppSchemas() {
  std::map<std::string, YAML::Node> out;
  for (const YAML::Node& crd : LoadDocs(kK8s / "overlays/hub/codecoapp-crd.yaml")) {
    for (const YAML::Node& version : crd["spec"]["versions"]) {
      out[Str(crd["spec"]["group"]) + "/" + Str(version["name"])] =
          version["schema"]["openAPIV3Schema"];
    }
  }
  return out;
}

// The schema's errors for a CodecoApp document.
std::vector<std::string> SchemaErrors(const YAML::Node& doc) {
  static const std::map<std::string, YAML::Node> schemas = CodecoAppSchemas();
  auto it = schemas.find(Str(doc["apiVersion"]));
  if (it == schemas.end()) return {"no CRD serves " + Str(doc["apiVersion"])};
  std::vector<std::string> errors;
  ValidateSchema(it->second, doc, "", errors);
  return errors;
}

// A scalar as a file holds it quoted: always a string.
YAML::Node Quoted(const std::string& text) {
  YAML::Node node(text);
  node.SetTag("!");
  return node;
}

// ACM's verdict on a document: "" when it accepts it, else why not.
std::string AcmError(const YAML::Node& doc) {
  YAML::Emitter out;
  out << doc;
  absl::StatusOr<codeco::acm::ParsedCam> parsed = codeco::acm::ParseCam(out.c_str());
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST_CASE("the CodecoApp CRDs are structural and serve both CAM apiVersions") {
  Problems problems;
  const std::vector<YAML::Node> crds = LoadDocs(kK8s / "overlays/hub/codecoapp-crd.yaml");
  REQUIRE(crds.size() == 2);
  for (const YAML::Node& crd : crds) {
    CHECK(Str(crd["apiVersion"]) == "apiextensions.k8s.io/v1");
    CHECK(Str(crd["kind"]) == "CustomResourceDefinition");
    CHECK(Str(crd["metadata"]["name"]) ==
          Str(crd["spec"]["names"]["plural"]) + "." + Str(crd["spec"]["group"]));
    CHECK(Str(crd["spec"]["names"]["kind"]) == "CodecoApp");
    for (const YAML::Node& v : crd["spec"]["versions"]) {
      CheckStructural(v["schema"]["openAPIV3Schema"], Id(crd) + " " + Str(v["name"]), problems);
    }
  }
  const auto schemas = CodecoAppSchemas();
  CHECK(schemas.contains("codeco.he-codeco.eu/v1alpha1"));
  CHECK(schemas.contains("codeco.io/v1"));
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("the CodecoApp CRDs accept every example CAM that ACM accepts") {
  Problems problems;
  int apps = 0;
  for (const fs::path& file : FilesUnder(kSource / "examples" / "cams", {".yaml", ".yml"})) {
    for (const YAML::Node& doc : LoadDocs(file)) {
      if (Str(doc["kind"]) != "CodecoApp") continue;
      ++apps;
      const std::string where = Rel(file) + " " + Str(doc["metadata"]["name"]);
      const std::string acm = AcmError(doc);
      if (!acm.empty()) {
        problems.Add(where, "ACM refuses this example: " + acm);
        continue;
      }
      const std::vector<std::string> errors = SchemaErrors(doc);
      if (!errors.empty()) problems.Add(where, absl::StrJoin(errors, "; "));
    }
  }
  CHECK(apps >= 10);
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("the CodecoApp CRDs refuse what ACM refuses and accept what ACM accepts") {
  const YAML::Node base = YAML::LoadFile((kSource / "examples/cams/bookinfo.yaml").string());
  REQUIRE(AcmError(base).empty());
  REQUIRE(SchemaErrors(base).empty());
  // A change to bookinfo and whether ACM (and so the schema) accepts it.
  struct Mutation {
    std::string name;
    std::function<void(YAML::Node&)> apply;
    bool accepted;
  };
  auto service = [](YAML::Node& d) { return d["spec"]["codecoapp-msspec"][0]; };
  auto container = [&](YAML::Node& d) { return service(d)["podspec"]["containers"][0]; };
  const std::vector<Mutation> mutations = {
      {"qosClass spelt in lower case", [](YAML::Node& d) { d["spec"]["qosClass"] = "gold"; },
       false},
      {"no services", [](YAML::Node& d) { d["spec"].remove("codecoapp-msspec"); }, false},
      {"an empty service list",
       [](YAML::Node& d) { d["spec"]["codecoapp-msspec"] = YAML::Node(YAML::NodeType::Sequence); },
       false},
      {"an unknown spec field", [](YAML::Node& d) { d["spec"]["colour"] = "red"; }, false},
      {"an extension field under v1alpha1", [&](YAML::Node& d) { service(d)["replicas"] = 3; },
       false},
      {"the extension field under codeco.io/v1",
       [&](YAML::Node& d) {
         d["apiVersion"] = "codeco.io/v1";
         service(d)["replicas"] = 3;
         service(d)["stateful"] = true;
         d["spec"]["intents"]["allowedCountries"].push_back("DE");
       },
       true},
      {"a lower-case country code",
       [](YAML::Node& d) {
         d["apiVersion"] = "codeco.io/v1";
         d["spec"]["intents"]["allowedCountries"].push_back("de");
       },
       false},
      {"a container without an image", [&](YAML::Node& d) { container(d).remove("image"); }, false},
      {"a port past 65535",
       [&](YAML::Node& d) { container(d)["ports"][0]["containerPort"] = 70000; }, false},
      {"a service name that is no DNS label",
       [&](YAML::Node& d) { service(d)["serviceName"] = "Product_Page"; }, false},
      {"an unknown service class",
       [&](YAML::Node& d) { service(d)["serviceChannels"][0]["serviceClass"] = "GOLD"; }, false},
      {"a channel without its target",
       [&](YAML::Node& d) { service(d)["serviceChannels"][0].remove("otherService"); }, false},
      {"an energy limit written as a percentage",
       [](YAML::Node& d) { d["spec"]["appEnergyLimit"] = "20%"; }, true},
      {"a profile in capitals", [](YAML::Node& d) { d["spec"]["performanceProfile"] = "Latency"; },
       true},
      {"CODECO's empty values",
       [](YAML::Node& d) {
         d["spec"]["qosClass"] = Quoted("");
         d["spec"]["appFailureTolerance"] = Quoted("");
       },
       true},
  };
  for (const Mutation& m : mutations) {
    YAML::Node doc = YAML::Clone(base);
    m.apply(doc);
    const std::string acm = AcmError(doc);
    const std::vector<std::string> schema = SchemaErrors(doc);
    INFO(m.name << "\nACM: " << (acm.empty() ? "accepts" : acm)
                << "\nschema: " << (schema.empty() ? "accepts" : absl::StrJoin(schema, "; ")));
    CHECK(acm.empty() == m.accepted);
    CHECK(schema.empty() == m.accepted);
  }
}

// ---------------------------------------------------------------------------
// kubectl's kustomize, where installed.

// True for the kinds the overlays hold that have no namespace.
bool ClusterScoped(const std::string& kind) {
  return kind == "Namespace" || kind == "CustomResourceDefinition" || kind == "ClusterRole" ||
         kind == "ClusterRoleBinding";
}

TEST_CASE("kubectl kustomize renders the base and each overlay to the objects modelled here") {
  if (Kubectl().empty()) {
    WARN("kubectl is not installed: the overlays were not rendered by kustomize");
    return;
  }
  CommandResult base =
      RunCommand({Kubectl(), "kustomize", (kK8s / "base").string()}, absl::Seconds(60));
  INFO(base.output);
  CHECK(base.exit_code == 0);
  for (const std::string& overlay : kOverlays) {
    const ObjectSet rendered = *RenderedObjects(overlay);
    const ObjectSet model = ModelObjects(overlay);
    std::set<std::string> rendered_ids, model_ids;
    std::set<std::string> generated;
    for (const auto& [name, cm] : OverlayBuild(overlay).config_maps) generated.insert(name);
    for (const Resource& r : rendered.resources) {
      std::string name = Str(r.node["metadata"]["name"]);
      // Generated ConfigMaps carry a content hash suffix: name-<10 chars>.
      if (Str(r.node["kind"]) == "ConfigMap" && name.size() > 11 &&
          generated.contains(name.substr(0, name.size() - 11))) {
        name = name.substr(0, name.size() - 11);
      }
      rendered_ids.insert(Str(r.node["kind"]) + "/" + name);
      // Everything lands in the codeco namespace, except cluster-wide kinds
      // and the objects that name their own (the LMS adapter's Role and
      // RoleBinding in the workloads namespace).
      const std::string kind = Str(r.node["kind"]);
      INFO(overlay << " " << Id(r.node));
      CHECK(Str(r.node["metadata"]["labels"]["codeco.io/role"]) == RoleOf(overlay));
      if (!ClusterScoped(kind)) {
        const Resource* source = FindObject(model, kind, name);
        const std::string own = source ? Str(source->node["metadata"]["namespace"]) : "";
        CHECK(Str(r.node["metadata"]["namespace"]) == (own.empty() ? "codeco" : own));
      } else {
        CHECK(Str(r.node["metadata"]["namespace"]).empty());
      }
    }
    for (const Resource& r : model.resources) model_ids.insert(Id(r.node));
    INFO("overlay " << overlay);
    CHECK(rendered_ids == model_ids);
    // The patches as this model applies them (the workloads' fields that no
    // transformer touches) are what kustomize made of them.
    for (const Resource& r : rendered.resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      const Resource* source =
          FindObject(model, Str(r.node["kind"]), Str(r.node["metadata"]["name"]));
      REQUIRE(source != nullptr);
      INFO(Id(r.node));
      for (const char* field : {"replicas", "podManagementPolicy", "updateStrategy"}) {
        INFO(field);
        CHECK(SameField(r.node["spec"][field], source->node["spec"][field]));
      }
      // The claims' specs (the labels transformer labels their metadata).
      const YAML::Node claims = r.node["spec"]["volumeClaimTemplates"];
      const YAML::Node model_claims = source->node["spec"]["volumeClaimTemplates"];
      const size_t count = claims ? claims.size() : 0;
      CHECK(count == (model_claims ? model_claims.size() : 0));
      for (size_t i = 0; i < count && model_claims && i < model_claims.size(); ++i) {
        CHECK(SameField(claims[i]["spec"], model_claims[i]["spec"]));
      }
      CHECK(SameField(PodSpec(r.node)["affinity"], PodSpec(source->node)["affinity"]));
      CHECK(PodSpec(r.node)["volumes"].size() == PodSpec(source->node)["volumes"].size());
      const YAML::Node containers = PodSpec(r.node)["containers"];
      REQUIRE(containers.size() == PodSpec(source->node)["containers"].size());
      for (size_t i = 0; i < containers.size(); ++i) {
        for (const char* field : {"args", "ports", "volumeMounts", "startupProbe", "livenessProbe",
                                  "readinessProbe", "securityContext", "resources"}) {
          INFO(Str(containers[i]["name"]) << " " << field);
          CHECK(SameField(containers[i][field], PodSpec(source->node)["containers"][i][field]));
        }
      }
    }
    for (const Resource* pdb : OfKind(rendered.resources, "PodDisruptionBudget")) {
      const Resource* source =
          FindObject(model, "PodDisruptionBudget", Str(pdb->node["metadata"]["name"]));
      REQUIRE(source != nullptr);
      CHECK(SameField(pdb->node["spec"], source->node["spec"]));
    }
  }
}

// ---------------------------------------------------------------------------
// The Kubernetes API schemas: every rendered object against the official
// Kubernetes Python client's models (services/kubelms/tests/check_kube_json.py,
// Debian's python3-kubernetes: the Kubernetes 1.22 API plus the newer fields
// the script allows and names).

// Emits `node` as YAML, quoting the scalars the source quoted (or that this
// test made): yaml-cpp's emitter would write a quoted "8080" or "true" plain,
// and the checker would read a number or a boolean where the API has a string.
void EmitKeepingQuotes(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (const auto& kv : node) {
        out << YAML::Key;
        EmitKeepingQuotes(out, kv.first);
        out << YAML::Value;
        EmitKeepingQuotes(out, kv.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const YAML::Node& item : node) EmitKeepingQuotes(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      // "?" is a plain scalar in the source; "!" a quoted or block one.
      if (node.Tag() == "?") {
        out << node.Scalar();
      } else {
        out << YAML::DoubleQuoted << node.Scalar();
      }
      break;
    default:
      out << YAML::Null;
  }
}

TEST_CASE("every rendered manifest passes the Kubernetes API models") {
  // What is rendered: each overlay (and the base) by this test's model, and
  // by kubectl's kustomize where installed (which also applies the patches).
  std::vector<ObjectSet> sets = AllObjectSets();
  Build base;
  LoadKustomization(kK8s / "base", base);
  CHECK_NO_PROBLEMS(base.problems);
  sets.push_back({"base", "", base.resources, base.secrets});
  if (!Kubectl().empty()) {
    CommandResult r =
        RunCommand({Kubectl(), "kustomize", (kK8s / "base").string()}, absl::Seconds(60));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    ObjectSet rendered{"kubectl kustomize base", "", {}, {}};
    for (const YAML::Node& doc : YAML::LoadAll(r.output)) {
      if (doc && doc.IsMap()) rendered.resources.push_back({doc, rendered.name});
    }
    sets.push_back(rendered);
  }
  // One file per object, one directory per rendering.
  ScratchDir scratch("deploy-manifests-api-models");
  std::vector<std::string> args = {"/usr/bin/python3", CODECO_CHECK_KUBE_JSON};
  size_t objects = 0;
  for (const ObjectSet& set : sets) {
    std::string slug = set.name;
    std::replace(slug.begin(), slug.end(), ' ', '-');
    std::replace(slug.begin(), slug.end(), '/', '-');
    const fs::path dir = scratch.path / slug;
    fs::create_directories(dir);
    args.push_back(dir.string());
    for (size_t i = 0; i < set.resources.size(); ++i) {
      const Resource& r = set.resources[i];
      // docker-compose.yml is no Kubernetes object: never in a rendering.
      INFO(set.name << " " << Id(r.node) << " from " << r.origin);
      CHECK_FALSE(absl::StrContains(r.origin, "docker-compose"));
      YAML::Emitter out;
      EmitKeepingQuotes(out, r.node);
      REQUIRE(out.good());
      const std::string file =
          absl::StrCat(i, "-", Str(r.node["kind"]), "-", Str(r.node["metadata"]["name"]), ".yaml");
      std::ofstream(dir / file) << out.c_str() << "\n";
      ++objects;
    }
  }
  // Nor is docker-compose.yml (or any compose file) under deploy/k8s.
  for (const fs::path& file : FilesUnder(kK8s, {".yaml", ".yml"})) {
    CHECK_FALSE(absl::StrContains(file.filename().string(), "compose"));
  }
  REQUIRE(objects > 0);
  CommandResult r = RunCommand(args, absl::Seconds(120));
  INFO(absl::StrJoin(args, " ") << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(absl::StrContains(r.output, absl::StrCat(objects, " documents")));
  // The only objects not checked are the kinds the client has no model for.
  for (absl::string_view line : absl::StrSplit(r.output, '\n')) {
    if (!absl::StrContains(line, "not checked (no model)") ||
        absl::StartsWith(line, "check_kube_json:")) {
      continue;
    }
    INFO(line);
    CHECK((absl::StrContains(line, " ServiceMonitor ") ||
           absl::StrContains(line, " PrometheusRule ") || absl::StrContains(line, " CodecoApp ")));
  }
}

// ---------------------------------------------------------------------------
// The image and compose.

// The docker-compose.yml at the top of the tree.
YAML::Node Compose() { return YAML::LoadFile((kSource / "docker-compose.yml").string()); }

// The value after `flag` in `argv` ("" when absent).
std::string ArgAfter(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag) return argv[i + 1];
  }
  return "";
}

TEST_CASE("the compose file runs built binaries with flags they accept") {
  const YAML::Node compose = Compose();
  Problems problems;
  int codeco = 0;
  for (const auto& kv : compose["services"]) {
    const std::string name = kv.first.Scalar();
    const YAML::Node svc = kv.second;
    if (!svc["image"] && !svc["build"]) problems.Add(name, "neither image nor build");
    const std::string user = Str(svc["user"]);
    if (svc["user"] && (user == "root" || absl::StartsWith(user, "0:") || user == "0")) {
      problems.Add(name, "runs as root");
    }
    for (const auto& dep : svc["depends_on"]) {
      if (!compose["services"][dep.first.Scalar()]) {
        problems.Add(name, "depends on " + dep.first.Scalar() + ", which is no service");
      }
    }
    std::vector<std::string> argv;
    for (const YAML::Node& a : svc["command"]) argv.push_back(Str(a));
    if (argv.empty() || !absl::StartsWith(argv[0], kImageBin)) continue;
    const std::string binary = argv[0].substr(strlen(kImageBin));
    if (!Binaries().contains(binary)) {
      problems.Add(name, argv[0] + " is no binary this build produces");
      continue;
    }
    if (absl::StartsWith(binary, "codeco-")) ++codeco;
    const std::set<std::string> flags = FlagsOf(binary);
    for (size_t i = 1; i < argv.size(); ++i) {
      if (!absl::StartsWith(argv[i], "--")) continue;
      const std::string flag = argv[i].substr(0, argv[i].find('='));
      if (flag == "--set" && i + 1 < argv.size()) {
        const std::string key = argv[i + 1].substr(0, argv[i + 1].find('='));
        if (!flags.contains(FlagOfKey(key))) {
          problems.Add(name, "--set " + key + ": no such key in " + binary + " --help");
        }
        ++i;
      } else if (!flags.contains(flag)) {
        problems.Add(name, flag + " is not in " + binary + " --help");
      }
    }
    // Container paths lie on the service's volumes.
    std::vector<std::string> targets;
    for (const YAML::Node& v : svc["volumes"]) {
      std::vector<std::string> parts = absl::StrSplit(Str(v), ':');
      if (parts.size() < 2) continue;
      targets.push_back(parts[1]);
      if (absl::StartsWith(parts[0], "./")) {
        if (parts[0] == "./deploy/docker/certs") {
          if (DeployDoc().find("deploy/docker/certs") == std::string::npos) {
            problems.Add(name, "docs/deploy.md does not say how to make deploy/docker/certs");
          }
        } else if (!fs::exists(kSource / parts[0])) {
          problems.Add(name, "no " + parts[0]);
        }
      } else if (!compose["volumes"][parts[0]]) {
        problems.Add(name, "volume " + parts[0] + " is not declared");
      }
    }
    for (const std::string& arg : argv) {
      if (!absl::StartsWith(arg, "/etc/") && !absl::StartsWith(arg, "/var/")) continue;
      bool mounted = false;
      for (const std::string& t : targets) mounted = mounted || Under(arg, t);
      if (!mounted) problems.Add(name, arg + " is on no volume");
    }
  }
  CHECK(codeco == 16);
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("the compose services listen on the emulator's addresses and call what listens") {
  const YAML::Node compose = Compose();
  const YAML::Node scenario = YAML::LoadFile((kSource / "deploy/docker/scenario.yaml").string());
  // CODEF's address plan (docs/codef.md): the hub 127.0.1.1, the i-th
  // managed cluster 127.0.<i+2>.1.
  std::map<std::string, std::string> cluster_ip = {
      {Str(scenario["federation"]["hub"]["name"]), "127.0.1.1"}};
  std::vector<std::string> managed;
  for (size_t i = 0; i < scenario["federation"]["clusters"].size(); ++i) {
    const std::string name = Str(scenario["federation"]["clusters"][i]["name"]);
    cluster_ip[name] = "127.0." + std::to_string(i + 2) + ".1";
    managed.push_back(name);
  }
  REQUIRE(managed.size() == 2);
  Problems problems;
  std::map<std::string, std::string> listening;  // address -> service
  auto listens = [&](const std::string& address, const std::string& who) {
    if (address.empty()) return;
    if (!listening.emplace(address, who).second) {
      problems.Add(who, address + " is also where " + listening[address] + " listens");
    }
  };
  std::map<std::string, std::vector<std::string>> commands;
  for (const auto& kv : compose["services"]) {
    const std::string name = kv.first.Scalar();
    std::vector<std::string>& argv = commands[name];
    for (const YAML::Node& a : kv.second["command"]) argv.push_back(Str(a));
    if (Str(kv.second["network_mode"]) != "host") {
      problems.Add(name, "not on the host network (CODEF's loopback address plan needs it)");
    }
    if (kv.second["environment"]) {
      listens(Str(kv.second["environment"]["REGISTRY_HTTP_ADDR"]), name);
    }
    for (const std::string& arg : argv) {
      if (absl::StartsWith(arg, "--web.listen-address=")) listens(arg.substr(21), name);
    }
    if (argv.empty()) continue;
    if (absl::EndsWith(argv[0], "/codef")) {
      listens(ArgAfter(argv, "--control-listen"), name);
      for (const std::string& mc : managed) {
        listens(cluster_ip[mc] + ":" + ArgAfter(argv, "--lms-port"), name + " LMS of " + mc);
        listens(cluster_ip[mc] + ":" + ArgAfter(argv, "--metrics-port"), name + " metrics");
      }
      continue;
    }
    if (!absl::StartsWith(argv[0], std::string(kImageBin) + "codeco-")) continue;
    const std::string cluster = ArgAfter(argv, "--cluster");
    const std::string listen = ArgAfter(argv, "--listen");
    if (!cluster_ip.contains(cluster)) {
      problems.Add(name, "cluster " + cluster + " is not in the scenario");
    } else {
      for (const char* flag : {"--listen", "--metrics-listen"}) {
        if (!absl::StartsWith(ArgAfter(argv, flag), cluster_ip[cluster] + ":")) {
          problems.Add(name,
                       std::string(flag) + " is not on " + cluster + "'s " + cluster_ip[cluster]);
        }
      }
    }
    listens(listen, name);
    listens(ArgAfter(argv, "--metrics-listen"), name);
    // The healthcheck asks this service, with its own certificate.
    std::vector<std::string> check;
    for (const YAML::Node& a : kv.second["healthcheck"]["test"]) check.push_back(Str(a));
    if (check.size() < 4 || check[0] != "CMD" || check[1] != std::string(kImageBin) + "codecoctl" ||
        check[2] != "health" || check[3] != listen ||
        ArgAfter(check, "--cert") != ArgAfter(argv, "--tls.cert-file") ||
        ArgAfter(check, "--key") != ArgAfter(argv, "--tls.key-file") ||
        ArgAfter(check, "--ca") != ArgAfter(argv, "--tls.ca-file")) {
      problems.Add(name,
                   "healthcheck is not `codecoctl health` of its --listen with its own "
                   "certificate");
    }
  }
  // Every loopback address a command names is where something listens.
  static const std::regex kAddress("127\\.[0-9]+\\.[0-9]+\\.[0-9]+:[0-9]+");
  int references = 0;
  for (const auto& [name, argv] : commands) {
    for (size_t i = 0; i < argv.size(); ++i) {
      if (i > 0 && absl::EndsWith(argv[i - 1], "listen")) continue;
      for (auto it = std::sregex_iterator(argv[i].begin(), argv[i].end(), kAddress);
           it != std::sregex_iterator(); ++it) {
        ++references;
        if (!listening.contains(it->str()) && !absl::StartsWith(argv[i], "--web.listen")) {
          problems.Add(name, it->str() + " (in " + argv[i] + ") is where nothing listens");
        }
      }
    }
  }
  CHECK(references > 30);
  // Prometheus scrapes what listens.
  const YAML::Node prometheus = YAML::LoadFile((kSource / "deploy/docker/prometheus.yml").string());
  for (const YAML::Node& job : prometheus["scrape_configs"]) {
    for (const YAML::Node& sc : job["static_configs"]) {
      for (const YAML::Node& target : sc["targets"]) {
        if (!listening.contains(Str(target))) {
          problems.Add("prometheus.yml", Str(target) + " is where nothing listens");
        }
      }
    }
  }
  CHECK_NO_PROBLEMS(problems);
}

TEST_CASE("the compose scenario is one codef accepts") {
  ScratchDir scratch("deploy-manifests-scenario");
  CommandResult r = RunCommand({Binaries().at("codef"), "--simulate", "--scenario",
                                (kSource / "deploy/docker/scenario.yaml").string(), "--duration",
                                "1s", "--out", scratch.path.string()},
                               absl::Seconds(60));
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

// One stage of a Dockerfile, as far as the checks read it.
struct DockerStage {
  std::string from;
  std::vector<std::string> run_words;  // every RUN, split on blanks
  std::vector<std::string> copy_from_build;
  std::string user;
  std::vector<std::string> raw;  // instructions, joined lines
};

// The stages of a Dockerfile (comments dropped, continued lines joined).
std::vector<DockerStage> ParseDockerfile(const fs::path& file) {
  std::vector<DockerStage> stages;
  std::istringstream in(ReadWholeFile(file));
  std::string instruction;
  std::vector<std::string> instructions;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "#")) continue;
    if (absl::EndsWith(line, "\\")) {
      instruction += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    instruction += line;
    if (!absl::StripAsciiWhitespace(instruction).empty()) instructions.push_back(instruction);
    instruction.clear();
  }
  for (const std::string& text : instructions) {
    std::vector<std::string> words = absl::StrSplit(text, ' ', absl::SkipWhitespace());
    if (words.empty()) continue;
    if (words[0] == "FROM") {
      stages.push_back({words.size() > 1 ? words[1] : ""});
      continue;
    }
    if (stages.empty()) continue;
    DockerStage& stage = stages.back();
    stage.raw.push_back(text);
    if (words[0] == "RUN")
      stage.run_words.insert(stage.run_words.end(), words.begin() + 1, words.end());
    if (words[0] == "USER" && words.size() > 1) stage.user = words[1];
    if (words[0] == "COPY" && words.size() > 2 && words[1] == "--from=build") {
      stage.copy_from_build.insert(stage.copy_from_build.end(), words.begin() + 2, words.end() - 1);
    }
  }
  return stages;
}

// The package names of a bash array in scripts/install-deps.sh.
std::vector<std::string> InstallDepsArray(const std::string& name) {
  const std::string text = ReadWholeFile(kSource / "scripts/install-deps.sh");
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(name + "=\\(([^)]*)\\)"))) return {};
  return absl::StrSplit(m[1].str(), absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

TEST_CASE("the Dockerfile builds with install-deps packages and ships every binary as non-root") {
  const std::vector<DockerStage> stages = ParseDockerfile(kSource / "deploy/docker/Dockerfile");
  REQUIRE(stages.size() == 2);
  CHECK(absl::StartsWith(stages[0].from, "debian:12"));
  CHECK(stages[1].from == "debian:12");
  // The build stage installs what install-deps.sh installs for building.
  std::vector<std::string> wanted = InstallDepsArray("BUILD_PKGS");
  const std::vector<std::string> libs = InstallDepsArray("LIB_PKGS");
  wanted.insert(wanted.end(), libs.begin(), libs.end());
  REQUIRE(wanted.size() > 10);
  const std::set<std::string> build_words(stages[0].run_words.begin(), stages[0].run_words.end());
  for (const std::string& pkg : wanted) {
    INFO("scripts/install-deps.sh lists " << pkg);
    CHECK(build_words.contains(pkg));
  }
  // The runtime stage ships every binary the manifests and compose run.
  std::set<std::string> shipped;
  for (const std::string& path : stages[1].copy_from_build) {
    shipped.insert(fs::path(path).filename().string());
  }
  for (const auto& [name, path] : Binaries()) {
    INFO(name);
    CHECK(shipped.contains(name));
  }
  // A fixed non-root user, no shell entrypoint.
  const std::string uid = stages[1].user.substr(0, stages[1].user.find(':'));
  CHECK(std::regex_match(uid, std::regex("[1-9][0-9]*")));
  for (const std::string& text : stages[1].raw) {
    INFO(text);
    CHECK_FALSE(absl::StartsWith(text, "ENTRYPOINT"));
    if (absl::StartsWith(text, "CMD")) CHECK(absl::StartsWith(text, "CMD [\""));
  }
  // The image's UID is the one the manifests and compose run as.
  for (const std::string& overlay : kOverlays) {
    for (const Resource& r : OverlayBuild(overlay).resources) {
      if (!IsWorkload(Str(r.node["kind"]))) continue;
      CHECK(Str(PodSpec(r.node)["securityContext"]["runAsUser"]) == uid);
    }
  }
  for (const auto& kv : Compose()["services"]) {
    if (!Str(kv.second["image"]).starts_with("codeco:")) continue;
    CHECK(Str(kv.second["user"]) == stages[1].user);
  }
  // .dockerignore keeps the build trees and certificates out of the context.
  const std::string ignore = ReadWholeFile(kSource / ".dockerignore");
  for (const char* entry : {"build", ".git", "deploy/docker/certs"}) {
    CHECK_THAT(ignore, Catch::Contains(std::string("\n") + entry + "\n"));
  }
}

TEST_CASE("the runtime image installs the package of every library the binaries load") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer build loads its runtimes (libasan, libubsan, ...) and more
  // than the image's Release build: the image is checked from plain builds.
  WARN("sanitizer build: the runtime libraries are checked in plain builds only");
  return;
#endif
  const std::string readelf = Which("readelf"), dpkg = Which("dpkg"), ldconfig = Which("ldconfig");
  if (readelf.empty() || dpkg.empty() || ldconfig.empty()) {
    WARN("readelf, dpkg or ldconfig is missing: the runtime libraries were not checked");
    return;
  }
  const std::vector<DockerStage> stages = ParseDockerfile(kSource / "deploy/docker/Dockerfile");
  REQUIRE(stages.size() == 2);
  const std::set<std::string> runtime(stages[1].run_words.begin(), stages[1].run_words.end());
  // Where each shared library is, as the dynamic linker finds it.
  const std::string cache = RunCommand({ldconfig, "-p"}, absl::Seconds(30)).output;
  std::set<std::string> needed;
  for (const auto& [name, path] : Binaries()) {
    const std::string dynamic = RunCommand({readelf, "-d", path}, absl::Seconds(30)).output;
    static const std::regex kNeeded("\\(NEEDED\\)[^\\[]*\\[([^\\]]+)\\]");
    for (auto it = std::sregex_iterator(dynamic.begin(), dynamic.end(), kNeeded);
         it != std::sregex_iterator(); ++it) {
      needed.insert((*it)[1]);
    }
  }
  REQUIRE(needed.size() > 10);
  // Where the dynamic linker finds each, and which package owns that file
  // (dpkg knows /lib paths and /usr/lib ones apart: ask for both).
  std::map<std::string, std::vector<std::string>> paths;  // soname -> candidates
  std::vector<std::string> query = {dpkg, "-S"};
  for (const std::string& soname : needed) {
    std::smatch m;
    const std::regex line("\\s" + std::regex_replace(soname, std::regex("[.+]"), "\\$&") +
                          " \\(libc6,x86-64[^)]*\\) => (\\S+)");
    if (!std::regex_search(cache, m, line)) continue;
    paths[soname] = {m[1].str(), fs::canonical(m[1].str()).string()};
    query.insert(query.end(), paths[soname].begin(), paths[soname].end());
  }
  // "package[, package]: /path" per path found (dpkg exits 1 for the others).
  const std::string owners = RunCommand(query, absl::Seconds(60)).output;
  for (const std::string& soname : needed) {
    INFO(soname);
    if (!paths.contains(soname)) {
      FAIL_CHECK("the dynamic linker does not find it");
      continue;
    }
    std::string package;
    std::istringstream in(owners);
    for (std::string line; std::getline(in, line);) {
      for (const std::string& path : paths[soname]) {
        if (absl::EndsWith(line, ": " + path)) package = line.substr(0, line.find(':'));
      }
    }
    INFO("owned by " << package);
    // libc6 is in every Debian image.
    CHECK((package == "libc6" || runtime.contains(package)));
  }
}

}  // namespace
