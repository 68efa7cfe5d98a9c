#include "stand_in_kube_apiserver.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace codeco::kubelms::testing {
namespace {

using json = nlohmann::json;

std::string Now() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

// A Status object as kube-apiserver writes it.
json StatusObject(int code, const std::string& reason, const std::string& message,
                  json details = nullptr) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

// The 404 Status of a missing object of a resource ("pods", "nodes").
json NotFound(const std::string& resource, const std::string& name) {
  return StatusObject(404, "NotFound", absl::StrCat(resource, " \"", name, "\" not found"),
                      {{"name", name}, {"kind", resource}});
}

std::string UrlDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int v = 0;
      if (absl::SimpleHexAtoi(text.substr(i + 1, 2), &v)) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i] == '+' ? ' ' : text[i]);
  }
  return out;
}

std::string Label(const json& object, const std::string& key, bool* present) {
  const json& labels = object["metadata"].value("labels", json::object());
  auto it = labels.find(key);
  *present = it != labels.end();
  return *present ? it->get<std::string>() : "";
}

// Splits a selector at the commas outside parentheses.
std::vector<std::string> Terms(const std::string& selector) {
  std::vector<std::string> terms;
  std::string current;
  int depth = 0;
  for (char c : selector) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      terms.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) terms.push_back(current);
  return terms;
}

// Whether `object` matches a label selector in the API's syntax.
bool MatchesLabels(const json& object, const std::string& selector) {
  for (std::string term : Terms(selector)) {
    term = std::string(absl::StripAsciiWhitespace(term));
    bool present = false;
    for (const char* op : {" notin ", " in "}) {
      const size_t at = term.find(op);
      if (at == std::string::npos) continue;
      const std::string key = term.substr(0, at);
      std::string values = term.substr(at + strlen(op));
      values = std::string(absl::StripSuffix(absl::StripPrefix(values, "("), ")"));
      std::set<std::string> set;
      for (absl::string_view v : absl::StrSplit(values, ',')) {
        set.insert(std::string(absl::StripAsciiWhitespace(v)));
      }
      const std::string value = Label(object, key, &present);
      const bool in = present && set.count(value) > 0;
      if (std::string(op) == " in " ? !in : in) return false;
      goto next;
    }
    if (const size_t at = term.find("!="); at != std::string::npos) {
      if (Label(object, term.substr(0, at), &present) == term.substr(at + 2) && present) {
        return false;
      }
    } else if (const size_t eq = term.find('='); eq != std::string::npos) {
      const size_t value_at = term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      if (Label(object, term.substr(0, eq), &present) != term.substr(value_at) || !present) {
        return false;
      }
    } else if (absl::StartsWith(term, "!")) {
      Label(object, term.substr(1), &present);
      if (present) return false;
    } else {
      Label(object, term, &present);
      if (!present) return false;
    }
  next:;
  }
  return true;
}

// Whether `object` matches a field selector (spec.nodeName, status.phase,
// metadata.name; = and !=).
bool MatchesFields(const json& object, const std::string& selector) {
  for (const std::string& term : Terms(selector)) {
    const bool negated = absl::StrContains(term, "!=");
    const size_t at = term.find(negated ? "!=" : "=");
    if (at == std::string::npos) continue;
    const std::string field = term.substr(0, at);
    const std::string want = term.substr(at + (negated                          ? 2
                                               : term.compare(at, 2, "==") == 0 ? 2
                                                                                : 1));
    std::string have;
    if (field == "spec.nodeName") have = object["spec"].value("nodeName", "");
    if (field == "status.phase") have = object["status"].value("phase", "");
    if (field == "metadata.name") have = object["metadata"].value("name", "");
    if (negated ? have == want : have != want) return false;
  }
  return true;
}

struct Request {
  std::string method;
  std::string path;
  std::map<std::string, std::string> query;
  std::string raw_target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct Event {
  int64_t version;
  std::string collection;  // "nodes", "pods" or a custom resource's "group/version/plural"
  std::string type;
  json object;
};

constexpr char kNodes[] = "nodes";
constexpr char kPods[] = "pods";

struct Failure {
  std::string method;
  std::string prefix;
  int status;
  int times;
};

}  // namespace

class StandInKubeApiServer::Impl {
 public:
  explicit Impl(StandInOptions options) : options_(std::move(options)) {
    std::string file = options_.nodes_file.empty()
                           ? std::string(KUBELMS_TESTDATA_DIR) + "/nodes.json"
                           : options_.nodes_file;
    std::ifstream in(file);
    REQUIRE(in.good());
    json list = json::parse(in);
    for (json& node : list["items"]) {
      node["metadata"]["resourceVersion"] = absl::StrCat(++version_);
      nodes_[node["metadata"]["name"].get<std::string>()] = node;
    }
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listener_, 64) == 0);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~Impl() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    acceptor_.join();
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&threads_mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    close(listener_);
  }

  int port_ = 0;
  StandInOptions options_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, json> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, json> pods_ ABSL_GUARDED_BY(mu_);
  // Custom objects by collection ("group/version/plural"), then (namespace, name).
  std::map<std::string, std::map<std::pair<std::string, std::string>, json>> custom_
      ABSL_GUARDED_BY(mu_);
  std::deque<Event> history_ ABSL_GUARDED_BY(mu_);
  int64_t expired_through_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> usage_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> image_failures_ ABSL_GUARDED_BY(mu_);
  std::vector<Failure> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
  int64_t end_watches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bookmarks_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> dumped_{0};  // Answer() runs under mu_ too

  absl::Mutex threads_mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(threads_mu_);
  int listener_ = -1;
  std::thread acceptor_;

  bool Stopping() const {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }

  // Records a change: a new version for the object, and an event.
  void RecordLocked(const std::string& collection, const std::string& type, json& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    object["metadata"]["resourceVersion"] = absl::StrCat(++version_);
    history_.push_back({version_, collection, type, object});
    while (history_.size() > options_.history_limit) {
      expired_through_ = history_.front().version;
      history_.pop_front();
    }
  }

  void Dump(const std::string& text) {
    if (options_.dump_dir.empty()) return;
    const int64_t n = ++dumped_;
    std::ofstream(absl::StrFormat("%s/%05d.json", options_.dump_dir, n)) << text;
  }

  void Accept() {
    while (!Stopping()) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      absl::MutexLock lock(&threads_mu_);
      threads_.emplace_back([this, fd] {
        Serve(fd);
        close(fd);
      });
    }
  }

  static bool WriteAll(int fd, std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  std::optional<Request> Read(int fd) {
    std::string in;
    char buffer[8192];
    size_t header_end = std::string::npos;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) {
        if (Stopping()) return std::nullopt;
        continue;
      }
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return std::nullopt;
      in.append(buffer, static_cast<size_t>(n));
    }
    Request r;
    std::vector<std::string> lines = absl::StrSplit(in.substr(0, header_end), "\r\n");
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    if (first.size() < 2) return std::nullopt;
    r.method = first[0];
    r.raw_target = first[1];
    const size_t q = r.raw_target.find('?');
    r.path = UrlDecode(r.raw_target.substr(0, q));
    if (q != std::string::npos) {
      for (absl::string_view pair : absl::StrSplit(r.raw_target.substr(q + 1), '&')) {
        const size_t eq = pair.find('=');
        r.query[UrlDecode(pair.substr(0, eq))] =
            eq == absl::string_view::npos ? "" : UrlDecode(pair.substr(eq + 1));
      }
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    size_t length = 0;
    if (auto it = r.headers.find("content-length"); it != r.headers.end()) {
      (void)absl::SimpleAtoi(it->second, &length);
    }
    r.body = in.substr(header_end + 4);
    while (r.body.size() < length) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return std::nullopt;
      r.body.append(buffer, static_cast<size_t>(n));
    }
    return r;
  }

  void Answer(int fd, int status, const json& body, const std::string& extra_header = "") {
    const std::string text = body.dump();
    Dump(text);
    static const std::map<int, std::string> kReasons = {{200, "OK"},
                                                        {201, "Created"},
                                                        {400, "Bad Request"},
                                                        {401, "Unauthorized"},
                                                        {404, "Not Found"},
                                                        {405, "Method Not Allowed"},
                                                        {409, "Conflict"},
                                                        {415, "Unsupported Media Type"},
                                                        {422, "Unprocessable Entity"},
                                                        {429, "Too Many Requests"},
                                                        {500, "Internal Server Error"},
                                                        {503, "Service Unavailable"}};
    auto reason = kReasons.find(status);
    WriteAll(fd, absl::StrCat("HTTP/1.1 ", status, " ",
                              reason == kReasons.end() ? "Status" : reason->second,
                              "\r\nContent-Type: application/json\r\nContent-Length: ", text.size(),
                              "\r\n", extra_header, "Connection: close\r\n\r\n", text));
  }

  void AnswerText(int fd, int status, const std::string& text) {
    WriteAll(fd, absl::StrCat("HTTP/1.1 ", status,
                              " Status\r\nContent-Type: text/plain; charset=utf-8\r\n"
                              "Content-Length: ",
                              text.size(), "\r\nConnection: close\r\n\r\n", text));
  }

  void Serve(int fd) {
    std::optional<Request> request = Read(fd);
    if (!request) return;
    Request& r = *request;
    std::optional<Failure> failure;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(absl::StrCat(r.method, " ", r.raw_target));
      for (Failure& f : failures_) {
        if (f.times > 0 && f.method == r.method && absl::StartsWith(r.raw_target, f.prefix)) {
          --f.times;
          failure = f;
          break;
        }
      }
    }
    if (!options_.token.empty() && r.headers["authorization"] != "Bearer " + options_.token) {
      return Answer(fd, 401, StatusObject(401, "Unauthorized", "Unauthorized"));
    }
    if (failure) {
      const std::map<int, std::string> reasons = {
          {429, "TooManyRequests"}, {500, "InternalError"}, {503, "ServiceUnavailable"}};
      auto it = reasons.find(failure->status);
      return Answer(fd, failure->status,
                    StatusObject(failure->status, it == reasons.end() ? "" : it->second,
                                 "injected by the test"),
                    failure->status == 429 ? "Retry-After: 1\r\n" : "");
    }
    std::vector<std::string> parts = absl::StrSplit(r.path, '/', absl::SkipEmpty());
    auto is = [&](std::initializer_list<const char*> want) {
      if (parts.size() != want.size()) return false;
      size_t i = 0;
      for (const char* w : want) {
        if (std::string(w) != "*" && parts[i] != w) return false;
        ++i;
      }
      return true;
    };
    const bool watch = r.query["watch"] == "true" || r.query["watch"] == "1";
    if (is({"api", "v1", "nodes"}) && r.method == "GET") {
      return watch ? Watch(fd, r, kNodes, "") : List(fd, r, kNodes, "");
    }
    if (is({"api", "v1", "nodes", "*"}) && r.method == "GET") return GetNode(fd, parts[3]);
    if (is({"api", "v1", "pods"}) && r.method == "GET") {
      return watch ? Watch(fd, r, kPods, "") : List(fd, r, kPods, "");
    }
    if (is({"api", "v1", "namespaces", "*", "pods"})) {
      if (r.method == "GET")
        return watch ? Watch(fd, r, kPods, parts[3]) : List(fd, r, kPods, parts[3]);
      if (r.method == "POST") return CreatePod(fd, r, parts[3]);
    }
    if (is({"api", "v1", "namespaces", "*", "pods", "*"})) {
      if (r.method == "GET") return GetPod(fd, parts[3], parts[5]);
      if (r.method == "DELETE") return DeletePod(fd, r, parts[3], parts[5]);
    }
    if (parts.size() == 9 &&
        is({"api", "v1", "nodes", "*", "proxy", "checkpoint", "*", "*", "*"}) &&
        r.method == "POST") {
      return Checkpoint(fd, parts[3], parts[6], parts[7], parts[8]);
    }
    if (is({"apis", "metrics.k8s.io", "v1beta1", "nodes", "*"}) && r.method == "GET") {
      return NodeMetrics(fd, parts[4]);
    }
    if (is({"apis", "metrics.k8s.io", "v1beta1", "namespaces", "*", "pods"}) && r.method == "GET") {
      return PodMetrics(fd, parts[4]);
    }
    if (parts.size() >= 4 && parts[0] == "apis") {
      const bool namespaced = parts.size() >= 6 && parts[3] == "namespaces";
      const std::string plural = namespaced ? parts[5] : parts[3];
      const std::string collection = absl::StrCat(parts[1], "/", parts[2], "/", plural);
      if (CustomKnown(collection)) {
        const std::string ns = namespaced ? parts[4] : "";
        const size_t rest = namespaced ? 6 : 4;
        if (parts.size() == rest && r.method == "GET") {
          return watch ? Watch(fd, r, collection, ns) : List(fd, r, collection, ns);
        }
        if (namespaced && parts.size() == rest && r.method == "POST") {
          return CreateCustom(fd, r, collection, ns);
        }
        if (namespaced && (parts.size() == rest + 1 ||
                           (parts.size() == rest + 2 && parts[rest + 1] == "status"))) {
          return CustomObject(fd, r, collection, ns, parts[rest], parts.size() == rest + 2);
        }
      }
    }
    Answer(fd, 404,
           StatusObject(404, "NotFound", "the server could not find the requested resource"));
  }

  bool Matches(const json& object, const Request& r, const std::string& ns) {
    if (!ns.empty() && object["metadata"].value("namespace", "") != ns) return false;
    auto labels = r.query.find("labelSelector");
    if (labels != r.query.end() && !MatchesLabels(object, labels->second)) return false;
    auto fields = r.query.find("fieldSelector");
    return fields == r.query.end() || MatchesFields(object, fields->second);
  }

  // The objects of `collection` that `r` selects, by "namespace/name".
  std::vector<std::pair<std::string, json>> SelectLocked(const std::string& collection,
                                                         const Request& r, const std::string& ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::pair<std::string, json>> items;
    if (collection == kNodes) {
      for (const auto& [name, node] : nodes_) {
        if (Matches(node, r, "")) items.emplace_back(name, node);
      }
      return items;
    }
    for (const auto& [key, object] : collection == kPods ? pods_ : custom_[collection]) {
      if (Matches(object, r, ns)) items.emplace_back(key.first + "/" + key.second, object);
    }
    return items;
  }

  // "PodList"'s apiVersion and kind for a collection.
  std::pair<std::string, std::string> ApiVersionKind(const std::string& collection) const {
    if (collection == kNodes) return {"v1", "Node"};
    if (collection == kPods) return {"v1", "Pod"};
    for (const CustomResource& c : options_.custom_resources) {
      if (absl::StrCat(c.group, "/", c.version, "/", c.plural) == collection) {
        return {absl::StrCat(c.group, "/", c.version), c.kind};
      }
    }
    return {"", ""};
  }

  void List(int fd, const Request& r, const std::string& collection, const std::string& ns) {
    std::vector<std::pair<std::string, json>> items;
    int64_t version;
    {
      absl::MutexLock lock(&mu_);
      version = version_;
      items = SelectLocked(collection, r, ns);
    }
    std::string after;
    if (auto it = r.query.find("continue"); it != r.query.end() && !it->second.empty()) {
      if (!absl::WebSafeBase64Unescape(it->second, &after)) {
        return Answer(fd, 400, StatusObject(400, "BadRequest", "invalid continue token"));
      }
    }
    size_t limit = 0;
    if (auto it = r.query.find("limit"); it != r.query.end())
      (void)absl::SimpleAtoi(it->second, &limit);
    const auto [api_version, kind] = ApiVersionKind(collection);
    json list = {{"kind", kind + "List"},
                 {"apiVersion", api_version},
                 {"metadata", {{"resourceVersion", absl::StrCat(version)}}},
                 {"items", json::array()}};
    size_t remaining = 0;
    std::string last;
    for (const auto& [key, object] : items) {
      if (!after.empty() && key <= after) continue;
      if (limit > 0 && list["items"].size() == limit) {
        ++remaining;
        continue;
      }
      list["items"].push_back(object);
      last = key;
    }
    if (remaining > 0) {
      list["metadata"]["continue"] = absl::WebSafeBase64Escape(last);
      list["metadata"]["remainingItemCount"] = remaining;
    }
    Answer(fd, 200, list);
  }

  void GetNode(int fd, const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      return Answer(fd, 404, NotFound("nodes", name));
    }
    Answer(fd, 200, it->second);
  }

  void GetPod(int fd, const std::string& ns, const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = pods_.find({ns, name});
    if (it == pods_.end()) {
      return Answer(fd, 404, NotFound("pods", name));
    }
    Answer(fd, 200, it->second);
  }

  void CreatePod(int fd, const Request& r, const std::string& ns) {
    json pod = json::parse(r.body, nullptr, false);
    if (pod.is_discarded() || !pod.is_object()) {
      return Answer(fd, 400, StatusObject(400, "BadRequest", "the body is not a JSON object"));
    }
    const std::string name = pod["metadata"].value("name", "");
    auto invalid = [&](const std::string& field, const std::string& message) {
      Answer(
          fd, 422,
          StatusObject(
              422, "Invalid", absl::StrCat("Pod \"", name, "\" is invalid: ", field, ": ", message),
              {{"name", name},
               {"kind", "Pod"},
               {"causes",
                {{{"reason", "FieldValueRequired"}, {"message", message}, {"field", field}}}}}));
    };
    if (name.empty()) return invalid("metadata.name", "Required value: name is required");
    if (pod["metadata"].value("namespace", ns) != ns) {
      return Answer(fd, 400,
                    StatusObject(400, "BadRequest",
                                 "the namespace of the provided object does not match the "
                                 "namespace sent on the request"));
    }
    const json& containers = pod["spec"]["containers"];
    if (!containers.is_array() || containers.empty()) {
      return invalid("spec.containers", "Required value");
    }
    for (size_t i = 0; i < containers.size(); ++i) {
      if (containers[i].value("image", "").empty()) {
        return invalid(absl::StrCat("spec.containers[", i, "].image"), "Required value");
      }
    }
    json created;
    {
      absl::MutexLock lock(&mu_);
      if (pods_.count({ns, name}) > 0) {
        return Answer(
            fd, 409,
            StatusObject(409, "AlreadyExists", absl::StrCat("pods \"", name, "\" already exists"),
                         {{"name", name}, {"kind", "pods"}}));
      }
      pod["metadata"]["namespace"] = ns;
      pod["metadata"]["uid"] =
          absl::StrFormat("7f3c%04x-0000-4000-8000-%012d", version_ & 0xffff, version_ + 1);
      pod["metadata"]["creationTimestamp"] = Now();
      pod["spec"]["restartPolicy"] = "Always";
      pod["status"] = {{"phase", "Pending"}, {"qosClass", "Burstable"}};
      RecordLocked(kPods, "ADDED", pod);
      pods_[{ns, name}] = pod;
      created = pod;
    }
    Answer(fd, 201, created);
    Kubelet(ns, name);
  }

  // The stand-in kubelet: runs a pod bound to a ready node, or fails it.
  void Kubelet(const std::string& ns, const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = pods_.find({ns, name});
    if (it == pods_.end()) return;
    json& pod = it->second;
    auto node = nodes_.find(pod["spec"].value("nodeName", ""));
    if (node == nodes_.end() || !Ready(node->second)) return;
    std::string failure;
    for (const json& c : pod["spec"]["containers"]) {
      if (auto f = image_failures_.find(c.value("image", "")); f != image_failures_.end()) {
        failure = f->second;
      }
    }
    json statuses = json::array();
    for (const json& c : pod["spec"]["containers"]) {
      json state = failure.empty() ? json{{"running", {{"startedAt", Now()}}}}
                                   : json{{"terminated",
                                           {{"exitCode", 1},
                                            {"reason", "Error"},
                                            {"message", failure},
                                            {"startedAt", Now()},
                                            {"finishedAt", Now()}}}};
      statuses.push_back({{"name", c.value("name", "")},
                          {"image", c.value("image", "")},
                          {"imageID", ""},
                          {"ready", failure.empty()},
                          {"restartCount", 0},
                          {"started", failure.empty()},
                          {"state", state}});
    }
    pod["status"] = {{"phase", failure.empty() ? "Running" : "Failed"},
                     {"qosClass", "Burstable"},
                     {"hostIP", "192.168.10.11"},
                     {"podIP", absl::StrCat("10.244.1.", version_ % 250 + 2)},
                     {"startTime", Now()},
                     {"conditions",
                      {{{"type", "Ready"},
                        {"status", failure.empty() ? "True" : "False"},
                        {"lastTransitionTime", Now()}}}},
                     {"containerStatuses", statuses}};
    RecordLocked(kPods, "MODIFIED", pod);
  }

  static bool Ready(const json& node) {
    for (const json& c : node["status"]["conditions"]) {
      if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
    }
    return false;
  }

  void DeletePod(int fd, const Request& r, const std::string& ns, const std::string& name) {
    json last;
    {
      absl::MutexLock lock(&mu_);
      auto it = pods_.find({ns, name});
      if (it == pods_.end()) {
        return Answer(fd, 404, NotFound("pods", name));
      }
      int64_t grace = 30;
      if (auto g = r.query.find("gracePeriodSeconds"); g != r.query.end()) {
        (void)absl::SimpleAtoi(g->second, &grace);
      }
      it->second["metadata"]["deletionTimestamp"] = Now();
      it->second["metadata"]["deletionGracePeriodSeconds"] = grace;
      RecordLocked(kPods, "MODIFIED", it->second);
      last = it->second;
    }
    Answer(fd, 200, last);
    // The kubelet stops the containers; the pod goes. A NotReady node's
    // kubelet does not answer: its pod stays Terminating unless forced
    // (gracePeriodSeconds=0 removes it without the kubelet).
    absl::MutexLock lock(&mu_);
    auto it = pods_.find({ns, name});
    if (it == pods_.end()) return;
    const int64_t grace = it->second["metadata"].value("deletionGracePeriodSeconds", int64_t{30});
    auto node = nodes_.find(it->second["spec"].value("nodeName", ""));
    if (grace != 0 && node != nodes_.end() && !Ready(node->second)) return;
    json gone = it->second;
    pods_.erase(it);
    RecordLocked(kPods, "DELETED", gone);
  }

  void Checkpoint(int fd, const std::string& node, const std::string& ns, const std::string& pod,
                  const std::string& container) {
    absl::MutexLock lock(&mu_);
    if (nodes_.count(node) == 0) {
      return Answer(fd, 404, NotFound("nodes", node));
    }
    auto it = pods_.find({ns, pod});
    if (it == pods_.end() || it->second["spec"].value("nodeName", "") != node) {
      return AnswerText(fd, 404, "pod does not exist\n");
    }
    bool found = false;
    for (const json& c : it->second["spec"]["containers"])
      found |= c.value("name", "") == container;
    if (!found)
      return AnswerText(fd, 404, absl::StrCat("container ", container, " does not exist\n"));
    Answer(fd, 200,
           {{"items",
             {absl::StrCat("/var/lib/kubelet/checkpoints/checkpoint-", pod, "_", ns, "-", container,
                           "-", Now(), ".tar")}}});
  }

  void NodeMetrics(int fd, const std::string& node) {
    absl::MutexLock lock(&mu_);
    if (nodes_.count(node) == 0) {
      return Answer(
          fd, 404,
          StatusObject(404, "NotFound",
                       absl::StrCat("nodemetrics.metrics.k8s.io \"", node, "\" not found"),
                       {{"name", node}, {"group", "metrics.k8s.io"}, {"kind", "nodes"}}));
    }
    Answer(fd, 200,
           {{"kind", "NodeMetrics"},
            {"apiVersion", "metrics.k8s.io/v1beta1"},
            {"metadata", {{"name", node}, {"creationTimestamp", Now()}}},
            {"timestamp", Now()},
            {"window", "10.005s"},
            {"usage", {{"cpu", "163478036n"}, {"memory", "1452088Ki"}}}});
  }

  void PodMetrics(int fd, const std::string& ns) {
    absl::MutexLock lock(&mu_);
    json list = {{"kind", "PodMetricsList"},
                 {"apiVersion", "metrics.k8s.io/v1beta1"},
                 {"metadata", json::object()},
                 {"items", json::array()}};
    for (const auto& [key, sample] : usage_) {
      if (key.first != ns || pods_.count(key) == 0) continue;
      json containers = json::array();
      bool first = true;
      for (const json& c : pods_[key]["spec"]["containers"]) {
        // The pod's sample on its first container.
        containers.push_back(
            {{"name", c.value("name", "")},
             {"usage",
              {{"cpu", first ? sample.first : "0"}, {"memory", first ? sample.second : "0"}}}});
        first = false;
      }
      list["items"].push_back(
          {{"metadata", {{"name", key.second}, {"namespace", ns}, {"creationTimestamp", Now()}}},
           {"timestamp", Now()},
           {"window", "10.005s"},
           {"containers", containers}});
    }
    Answer(fd, 200, list);
  }

  bool CustomKnown(const std::string& collection) const {
    return !ApiVersionKind(collection).second.empty();
  }

  // The Status of a failed call on custom object `name` of `collection`
  // ("group/version/plural"): `message` names the object, "<plural>.<group>
  // \"<name>\"", followed by `what`; `prefix` goes before it.
  static json CustomStatus(int code, const std::string& reason, const std::string& collection,
                           const std::string& name, const std::string& prefix,
                           const std::string& what) {
    const std::vector<std::string> parts = absl::StrSplit(collection, '/');
    return StatusObject(code, reason,
                        absl::StrCat(prefix, parts[2], ".", parts[0], " \"", name, "\"", what),
                        {{"name", name}, {"group", parts[0]}, {"kind", parts[2]}});
  }

  static json Conflict(const std::string& collection, const std::string& name) {
    return CustomStatus(409, "Conflict", collection, name, "Operation cannot be fulfilled on ",
                        ": the object has been modified; please apply your changes to the "
                        "latest version and try again");
  }

  // POST of a custom object: stored with a uid, generation 1 and no status
  // (the status subresource is written on its own).
  void CreateCustom(int fd, const Request& r, const std::string& collection,
                    const std::string& ns) {
    json object = json::parse(r.body, nullptr, false);
    if (object.is_discarded() || !object.is_object()) {
      return Answer(fd, 400, StatusObject(400, "BadRequest", "the body is not a JSON object"));
    }
    const std::string name = object["metadata"].value("name", "");
    const auto [api_version, kind] = ApiVersionKind(collection);
    if (name.empty()) {
      return Answer(fd, 422,
                    StatusObject(422, "Invalid",
                                 absl::StrCat(kind,
                                              " \"\" is invalid: metadata.name: Required "
                                              "value: name or generateName is required"),
                                 {{"kind", kind},
                                  {"causes",
                                   {{{"reason", "FieldValueRequired"},
                                     {"message",
                                      "Required value: name or generateName is "
                                      "required"},
                                     {"field", "metadata.name"}}}}}));
    }
    if (object.value("apiVersion", api_version) != api_version ||
        object.value("kind", kind) != kind) {
      return Answer(
          fd, 400,
          StatusObject(
              400, "BadRequest",
              absl::StrCat("the API version in the data (", object.value("apiVersion", ""),
                           ") does not match the expected API version (", api_version, ")")));
    }
    json created;
    {
      absl::MutexLock lock(&mu_);
      auto& objects = custom_[collection];
      if (objects.count({ns, name}) > 0) {
        return Answer(fd, 409,
                      CustomStatus(409, "AlreadyExists", collection, name, "", " already exists"));
      }
      object["apiVersion"] = api_version;
      object["kind"] = kind;
      object.erase("status");
      json& meta = object["metadata"];
      meta["namespace"] = ns;
      meta["uid"] =
          absl::StrFormat("5e1d%04x-0000-4000-8000-%012d", version_ & 0xffff, version_ + 1);
      meta["creationTimestamp"] = Now();
      meta["generation"] = 1;
      meta.erase("deletionTimestamp");
      RecordLocked(collection, "ADDED", object);
      objects[{ns, name}] = object;
      created = object;
    }
    Answer(fd, 201, created);
  }

  // GET, PUT, PATCH (a JSON merge patch) and DELETE of one custom object or
  // of its status subresource, with kube-apiserver's rules: writes to the
  // object ignore its status and bump metadata.generation when the spec (or
  // deletionTimestamp) changes; writes to /status change only the status; a
  // metadata.resourceVersion in the body must be the stored one (409); an
  // object being deleted goes when its last finalizer does.
  void CustomObject(int fd, const Request& r, const std::string& collection, const std::string& ns,
                    const std::string& name, bool status) {
    json answer;
    {
      absl::MutexLock lock(&mu_);
      auto& objects = custom_[collection];
      auto it = objects.find({ns, name});
      if (it == objects.end()) {
        return Answer(fd, 404, CustomStatus(404, "NotFound", collection, name, "", " not found"));
      }
      json& stored = it->second;
      if (r.method == "GET") return Answer(fd, 200, stored);
      json updated;
      if (r.method == "DELETE") {
        if (status) return Answer(fd, 405, StatusObject(405, "MethodNotAllowed", "not allowed"));
        if (stored["metadata"].value("finalizers", json::array()).empty()) {
          json gone = stored;
          objects.erase(it);
          RecordLocked(collection, "DELETED", gone);
          return Answer(fd, 200, gone);
        }
        updated = stored;
        if (!updated["metadata"].contains("deletionTimestamp")) {
          updated["metadata"]["deletionTimestamp"] = Now();
          updated["metadata"]["deletionGracePeriodSeconds"] = 0;
        }
      } else if (r.method == "PUT" || r.method == "PATCH") {
        const json body = json::parse(r.body, nullptr, false);
        if (body.is_discarded() || !body.is_object()) {
          return Answer(fd, 400, StatusObject(400, "BadRequest", "the body is not a JSON object"));
        }
        if (r.method == "PATCH" && r.headers.count("content-type") &&
            r.headers.at("content-type") != "application/merge-patch+json") {
          return Answer(fd, 415,
                        StatusObject(415, "UnsupportedMediaType",
                                     "the body of the request was in an unknown format - "
                                     "accepted media types include: application/json-patch+json, "
                                     "application/merge-patch+json, application/apply-patch+yaml"));
        }
        const std::string want = body.contains("metadata") && body["metadata"].is_object()
                                     ? body["metadata"].value("resourceVersion", "")
                                     : "";
        if (!want.empty() && want != stored["metadata"].value("resourceVersion", "")) {
          return Answer(fd, 409, Conflict(collection, name));
        }
        if (r.method == "PUT") {
          updated = body;
        } else {
          updated = stored;
          updated.merge_patch(body);
        }
        json meta = stored["metadata"];
        if (updated.contains("metadata") && updated["metadata"].is_object()) {
          for (const char* key : {"labels", "annotations", "finalizers"}) {
            if (status) break;
            if (updated["metadata"].contains(key)) {
              meta[key] = updated["metadata"][key];
            } else {
              meta.erase(key);
            }
          }
        }
        if (status) {
          json s = updated.value("status", json());
          updated = stored;
          if (s.is_null()) {
            updated.erase("status");
          } else {
            updated["status"] = s;
          }
        } else {
          if (stored.contains("status")) {
            updated["status"] = stored["status"];
          } else {
            updated.erase("status");
          }
          updated["apiVersion"] = stored["apiVersion"];
          updated["kind"] = stored["kind"];
          if (updated.value("spec", json()) != stored.value("spec", json())) {
            meta["generation"] = meta.value("generation", 0) + 1;
          }
        }
        updated["metadata"] = meta;
      } else {
        return Answer(fd, 405, StatusObject(405, "MethodNotAllowed", "not allowed"));
      }
      if (updated["metadata"].contains("deletionTimestamp") &&
          !stored["metadata"].contains("deletionTimestamp")) {
        updated["metadata"]["generation"] = updated["metadata"].value("generation", 0) + 1;
      }
      if (updated["metadata"].contains("deletionTimestamp") &&
          updated["metadata"].value("finalizers", json::array()).empty()) {
        objects.erase(it);
        RecordLocked(collection, "DELETED", updated);
        answer = updated;
      } else {
        if (updated == stored) return Answer(fd, 200, stored);  // no change, no event
        RecordLocked(collection, "MODIFIED", updated);
        stored = updated;
        answer = stored;
      }
    }
    Answer(fd, 200, answer);
  }

  // A chunked watch stream.
  void Watch(int fd, const Request& r, const std::string& collection, const std::string& ns) {
    auto query = [&](const char* key) {
      auto it = r.query.find(key);
      return it == r.query.end() ? std::string() : it->second;
    };
    int64_t from = 0;
    const std::string version = query("resourceVersion");
    if (!version.empty() && !absl::SimpleAtoi(version, &from)) {
      return Answer(fd, 400,
                    StatusObject(400, "BadRequest",
                                 absl::StrCat("invalid resource version \"", version, "\"")));
    }
    const bool bookmarks = query("allowWatchBookmarks") == "true";
    int64_t timeout_seconds = 1800;
    if (!query("timeoutSeconds").empty())
      (void)absl::SimpleAtoi(query("timeoutSeconds"), &timeout_seconds);
    const absl::Time end = absl::Now() + absl::Seconds(timeout_seconds);
    if (!WriteAll(fd,
                  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")) {
      return;
    }
    auto send = [&](const json& event) {
      const std::string line = event.dump() + "\n";
      Dump(event.dump());
      return WriteAll(fd, absl::StrCat(absl::Hex(line.size()), "\r\n", line, "\r\n"));
    };
    auto finish = [&] { WriteAll(fd, "0\r\n\r\n"); };
    std::vector<json> out;
    int64_t last = from;
    int64_t ended_at = 0;
    int64_t bookmarked_at = 0;
    {
      absl::MutexLock lock(&mu_);
      ended_at = end_watches_;
      bookmarked_at = bookmarks_;
      if (from == 0) {
        // Synthetic ADDED events for what exists.
        last = version_;
        for (auto& [key, object] : SelectLocked(collection, r, ns)) {
          out.push_back({{"type", "ADDED"}, {"object", std::move(object)}});
        }
      } else if (from < expired_through_) {
        out.push_back({{"type", "ERROR"},
                       {"object", StatusObject(410, "Expired",
                                               absl::StrCat("too old resource version: ", from,
                                                            " (", expired_through_ + 1, ")"))}});
        last = -1;
      }
    }
    for (const json& e : out) {
      if (!send(e)) return;
    }
    if (last < 0) return finish();
    while (true) {
      out.clear();
      bool stop = false;
      bool bookmark = false;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || end_watches_ != ended_at || bookmarks_ != bookmarked_at ||
                 (!history_.empty() && history_.back().version > last);
        };
        mu_.AwaitWithDeadline(absl::Condition(&ready),
                              std::min(end, absl::Now() + absl::Milliseconds(200)));
        if (stopping_ || end_watches_ != ended_at || absl::Now() >= end) stop = true;
        for (const Event& e : history_) {
          if (stop || e.version <= last) continue;
          last = e.version;
          if (e.collection != collection) continue;
          if (!Matches(e.object, r, collection == kNodes ? "" : ns)) continue;
          out.push_back({{"type", e.type}, {"object", e.object}});
        }
        if (bookmarks_ != bookmarked_at) {
          bookmarked_at = bookmarks_;
          bookmark = bookmarks;
          last = std::max(last, version_);
        }
      }
      for (const json& e : out) {
        if (!send(e)) return;
      }
      if (bookmark) {
        if (!send({{"type", "BOOKMARK"},
                   {"object",
                    {{"kind", ApiVersionKind(collection).second},
                     {"apiVersion", ApiVersionKind(collection).first},
                     {"metadata", {{"resourceVersion", absl::StrCat(last)}}}}}})) {
          return;
        }
      }
      if (stop) return finish();
    }
  }
};

StandInKubeApiServer::StandInKubeApiServer(StandInOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

StandInKubeApiServer::~StandInKubeApiServer() = default;

std::string StandInKubeApiServer::Url() const {
  return absl::StrCat("http://127.0.0.1:", impl_->port_);
}

std::string StandInKubeApiServer::Token() const { return impl_->options_.token; }

void StandInKubeApiServer::SetNodeReady(const std::string& node, bool ready) {
  absl::MutexLock lock(&impl_->mu_);
  auto it = impl_->nodes_.find(node);
  REQUIRE(it != impl_->nodes_.end());
  for (json& c : it->second["status"]["conditions"]) {
    if (c.value("type", "") == "Ready") {
      c["status"] = ready ? "True" : "Unknown";
      c["reason"] = ready ? "KubeletReady" : "NodeStatusUnknown";
      c["lastTransitionTime"] = Now();
    }
  }
  impl_->RecordLocked(kNodes, "MODIFIED", it->second);
}

void StandInKubeApiServer::SetPodUsage(const std::string& ns, const std::string& pod,
                                       const std::string& cpu, const std::string& memory) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->usage_[{ns, pod}] = {cpu, memory};
}

void StandInKubeApiServer::SetImageFailure(const std::string& image, const std::string& message) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->image_failures_[image] = message;
}

void StandInKubeApiServer::ExpireHistory() {
  absl::MutexLock lock(&impl_->mu_);
  // As a compaction past every version handed out so far.
  impl_->expired_through_ = ++impl_->version_;
  impl_->history_.clear();
}

void StandInKubeApiServer::EndWatches() {
  absl::MutexLock lock(&impl_->mu_);
  ++impl_->end_watches_;
}

void StandInKubeApiServer::SendBookmarks() {
  absl::MutexLock lock(&impl_->mu_);
  ++impl_->bookmarks_;
}

void StandInKubeApiServer::FailNext(const std::string& method, const std::string& path_prefix,
                                    int http_status, int times) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->failures_.push_back({method, path_prefix, http_status, times});
}

std::vector<std::string> StandInKubeApiServer::Requests() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->requests_;
}

}  // namespace codeco::kubelms::testing
