#include "checkpointer/drivers/kubelet_driver.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "checkpointer/image/oci_image.h"
#include "codeco/common/status.h"
#include "nlohmann/json.hpp"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;

// The kubelet's text kept in an error.
constexpr size_t kMaxErrorText = 512;
// Answers are read up to this size; the rest is dropped.
constexpr size_t kMaxAnswer = 1 << 20;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// `text` without surrounding blanks, cut to kMaxErrorText bytes (at a UTF-8
// character boundary) with a note of the full size.
std::string Excerpt(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() <= kMaxErrorText) return std::string(text);
  size_t cut = kMaxErrorText;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "… (", text.size(), " bytes)");
}

// A plain host name: what a node name may be (a DNS subdomain), or an IPv4 address.
bool IsNodeName(absl::string_view node) {
  if (node.empty() || node.size() > 253) return false;
  return std::all_of(node.begin(), node.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
  });
}

struct HttpAnswer {
  CURLcode code = CURLE_OK;
  std::string curl_error;
  long status = 0;
  std::string body;
};

// One request to a kubelet: `method` ("POST" with an empty body, or "GET").
HttpAnswer Exchange(const KubeletCheckpointDriver::Options& options, const std::string& method,
                    const std::string& url) {
  GlobalInitOnce();
  HttpAnswer answer;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    answer.code = CURLE_FAILED_INIT;
    answer.curl_error = "curl_easy_init failed";
    return answer;
  }
  char error[CURL_ERROR_SIZE] = {};
  absl::Duration timeout = options.request_timeout;
  if (options.checkpoint_timeout > absl::ZeroDuration()) {
    timeout = std::max(timeout, options.checkpoint_timeout + absl::Seconds(30));
  }
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
  if (!options.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  if (!options.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, options.client_cert_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, options.client_key_file.c_str());
  }
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
  }
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* body = static_cast<std::string*>(user);
        const size_t room = kMaxAnswer - std::min(kMaxAnswer, body->size());
        body->append(data, std::min(room, size * n));
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  answer.code = curl_easy_perform(curl);
  if (answer.code != CURLE_OK) {
    answer.curl_error = error[0] != '\0' ? error : curl_easy_strerror(answer.code);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return answer;
}

// OK for a 2xx answer; otherwise what failed, as `what` ("kubelet of node
// n1: checkpoint of ns/pod/c") and the kubelet's own text.
absl::Status AnswerStatus(const HttpAnswer& a, const std::string& what, const std::string& url) {
  if (a.code != CURLE_OK) {
    const std::string why = absl::StrCat(what, ": ", url, ": ", a.curl_error);
    switch (a.code) {
      case CURLE_OPERATION_TIMEDOUT:
        return absl::DeadlineExceededError(why);
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CACERT_BADFILE:
      case CURLE_SSL_ENGINE_NOTFOUND:
      case CURLE_SSL_ENGINE_SETFAILED:
        return absl::FailedPreconditionError(
            absl::StrCat(why, " (check the client certificate, key and CA files)"));
      case CURLE_PEER_FAILED_VERIFICATION:
        return absl::FailedPreconditionError(
            absl::StrCat(why, " (the kubelet's certificate does not verify against the CA file)"));
      case CURLE_UNSUPPORTED_PROTOCOL:
      case CURLE_URL_MALFORMAT:
        return absl::InvalidArgumentError(why);
      default:
        return absl::UnavailableError(why);
    }
  }
  if (a.status / 100 == 2) return absl::OkStatus();
  const std::string text = a.body.empty() ? std::string("(no text)") : Excerpt(a.body);
  const std::string why = absl::StrCat(what, ": HTTP ", a.status, ": ", text);
  switch (a.status) {
    case 400:
      return absl::InvalidArgumentError(why);
    case 401:
      return absl::UnauthenticatedError(
          absl::StrCat(why, " (the kubelet accepts no client certificate of this driver)"));
    case 403:
      return absl::PermissionDeniedError(
          absl::StrCat(why, " (the client certificate's user may not create nodes/checkpoint)"));
    case 404:
      return absl::NotFoundError(why);
    case 408:
    case 504:
      return absl::DeadlineExceededError(why);
    case 429:
    case 502:
    case 503:
      return absl::UnavailableError(why);
    case 500:
      return absl::InternalError(why);
    default:
      return absl::UnknownError(why);
  }
}

// The path segment `value` of `field`, URL-escaped; INVALID_ARGUMENT when empty.
absl::StatusOr<std::string> Segment(const std::string& value, const std::string& field) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty"));
  char* escaped = curl_easy_escape(nullptr, value.data(), static_cast<int>(value.size()));
  if (escaped == nullptr) return absl::InternalError(absl::StrCat(field, ": cannot escape"));
  std::string out(escaped);
  curl_free(escaped);
  return out;
}

// The archive path of a checkpoint answer {"items":["<path>"]}.
absl::StatusOr<std::string> ArchivePath(const std::string& body, const std::string& what) {
  auto bad = [&](absl::string_view why) {
    return absl::InternalError(absl::StrCat(
        what, ": the kubelet answered ", why,
        ", want {\"items\":[\"<archive path>\"]}: ", body.empty() ? "(nothing)" : Excerpt(body)));
  };
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad("no JSON");
  if (!doc.is_object()) return bad("JSON that is no object");
  const auto items = doc.find("items");
  if (items == doc.end() || !items->is_array()) return bad("no \"items\" list");
  if (items->empty()) return bad("an empty \"items\" list");
  if (!items->front().is_string()) return bad("an item that is no string");
  std::string path = items->front().get<std::string>();
  const fs::path p(path);
  const bool dotdot = std::any_of(p.begin(), p.end(), [](const fs::path& c) { return c == ".."; });
  if (path.empty() || !p.is_absolute() || dotdot || absl::StrContains(path, '\0')) {
    return bad("an archive path that is not absolute and plain");
  }
  return path;
}

}  // namespace

absl::StatusOr<std::string> KubeletCheckpointDriver::KubeletUrl(const std::string& node) const {
  if (!IsNodeName(node)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target.node: \"", node, "\" is not a node name"));
  }
  std::string url;
  if (auto it = options_.node_urls.find(node); it != options_.node_urls.end()) {
    url = it->second;
  } else {
    url = absl::StrReplaceAll(options_.url_template, {{"{node}", node}});
  }
  while (absl::EndsWith(url, "/")) url.pop_back();
  if (!absl::StartsWith(url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubelet URL of node ", node, ": \"", url, "\" is not https://"));
  }
  return url;
}

bool KubeletCheckpointDriver::Handles(const ContainerTarget& target) const {
  if (!options_.kubernetes) return false;
  if (target.node.empty() || target.pod.empty() || target.container.empty()) return false;
  return options_.local_node.empty() || target.node == options_.local_node;
}

absl::StatusOr<StateDump> KubeletCheckpointDriver::Checkpoint(const ContainerTarget& target,
                                                              const fs::path& directory) {
  const std::string what =
      absl::StrCat("kubelet of node ", target.node, ": checkpoint of ", target.pod_namespace, "/",
                   target.pod, "/", target.container);
  std::error_code error;
  if (fs::exists(directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", directory.string(), " exists"));
  }
  ASSIGN_OR_RETURN(const std::string base, KubeletUrl(target.node));
  ASSIGN_OR_RETURN(const std::string ns, Segment(target.pod_namespace, "target.pod_namespace"));
  ASSIGN_OR_RETURN(const std::string pod, Segment(target.pod, "target.pod"));
  ASSIGN_OR_RETURN(const std::string container, Segment(target.container, "target.container"));
  std::string url = absl::StrCat(base, "/checkpoint/", ns, "/", pod, "/", container);
  if (options_.checkpoint_timeout > absl::ZeroDuration()) {
    absl::StrAppend(
        &url, "?timeout=",
        static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(options_.checkpoint_timeout))));
  }

  const HttpAnswer answer = Exchange(options_, "POST", url);
  RETURN_IF_ERROR(AnswerStatus(answer, what, url));
  ASSIGN_OR_RETURN(const std::string reported, ArchivePath(answer.body, what));
  const fs::path archive = options_.node_root / fs::path(reported).relative_path();
  if (!fs::is_regular_file(archive, error)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the archive ", reported, " is not on this disk (looked at ", archive.string(),
        "; the agent must run on the node, with node_root where the node's / is)"));
  }

  fs::create_directories(directory.parent_path(), error);
  if (!fs::create_directory(directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": cannot create ", directory.string(),
                                                      ": ", error ? error.message() : "it exists"));
  }
  auto fail = [&](absl::Status status) {
    std::error_code ignored;
    fs::remove_all(directory, ignored);
    return status;
  };
  // The kubelet names each archive after its time and never rewrites it, so
  // a hard link is the checkpoint at no cost; across filesystems, a copy.
  const fs::path copy = directory / kKubeletArchiveFile;
  fs::create_hard_link(archive, copy, error);
  if (error) {
    error.clear();
    fs::copy_file(archive, copy, error);
  }
  if (error) {
    return fail(absl::InternalError(absl::StrCat(what, ": copying ", archive.string(), " to ",
                                                 copy.string(), ": ", error.message())));
  }
  absl::StatusOr<FileDigest> digest = DigestFile(copy);
  if (!digest.ok()) {
    return fail(absl::InternalError(
        absl::StrCat(what, ": reading ", copy.string(), ": ", digest.status().message())));
  }
  if (options_.remove_kubelet_archive) {
    // The copy is made: a failed removal leaves a file for the node's
    // cleanup, not a broken checkpoint.
    fs::remove(archive, error);
  }

  StateDump dump;
  dump.directory = directory;
  dump.bytes = digest->size;
  dump.facts[kDriverFact] = name();
  dump.facts[kKubeletArchiveFact] = reported;
  dump.facts[kKubeletArchiveDigestFact] = digest->digest;
  dump.facts[kKubeletSourceFact] =
      absl::StrCat(target.node, "/", target.pod_namespace, "/", target.pod, "/", target.container);
  return dump;
}

absl::Status KubeletCheckpointDriver::Resume(const ContainerTarget&) { return absl::OkStatus(); }

absl::Status KubeletCheckpointDriver::Retire(const ContainerTarget&) { return absl::OkStatus(); }

absl::Status KubeletCheckpointDriver::Verify(const ContainerTarget& restored,
                                             const std::map<std::string, std::string>& facts) {
  const std::string container =
      absl::StrCat(restored.pod_namespace, "/", restored.pod, "/", restored.container);
  const std::string what =
      absl::StrCat("kubelet of node ", restored.node, ": verifying ", container);
  auto driver = facts.find(kDriverFact);
  if (driver == facts.end() || driver->second != name()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the checkpoint was not taken by the kubelet driver (", kDriverFact,
        " is \"", driver == facts.end() ? "" : driver->second, "\")"));
  }
  ASSIGN_OR_RETURN(const std::string base, KubeletUrl(restored.node));
  const std::string url = base + "/pods";
  const HttpAnswer answer = Exchange(options_, "GET", url);
  RETURN_IF_ERROR(AnswerStatus(answer, what, url));

  // A v1.PodList; anything unexpected in it is skipped, not trusted.
  const nlohmann::json doc = nlohmann::json::parse(answer.body, nullptr, false);
  const auto items = doc.is_object() ? doc.find("items") : doc.end();
  if (doc.is_discarded() || !doc.is_object() || items == doc.end() || !items->is_array()) {
    return absl::InternalError(
        absl::StrCat(what, ": GET /pods answered no pod list: ", Excerpt(answer.body)));
  }
  auto text = [](const nlohmann::json& o, const char* key) {
    const auto it = o.is_object() ? o.find(key) : o.end();
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto object = [](const nlohmann::json& o, const char* key) -> const nlohmann::json* {
    const auto it = o.is_object() ? o.find(key) : o.end();
    return it != o.end() && it->is_object() ? &*it : nullptr;
  };
  for (const nlohmann::json& pod : *items) {
    const nlohmann::json* meta = object(pod, "metadata");
    if (meta == nullptr || text(*meta, "name") != restored.pod ||
        text(*meta, "namespace") != restored.pod_namespace) {
      continue;
    }
    const nlohmann::json* status = object(pod, "status");
    const auto statuses = status != nullptr ? status->find("containerStatuses") : pod.end();
    const bool listed = status != nullptr && statuses != status->end() && statuses->is_array();
    for (const nlohmann::json& c : listed ? *statuses : nlohmann::json::array()) {
      if (text(c, "name") != restored.container) continue;
      const nlohmann::json* state = object(c, "state");
      if (state != nullptr && object(*state, "running") != nullptr) return absl::OkStatus();
      std::string how = "in no known state";
      if (const nlohmann::json* waiting = state ? object(*state, "waiting") : nullptr) {
        how = absl::StrCat("waiting (", text(*waiting, "reason"), ": ",
                           Excerpt(text(*waiting, "message")), ")");
      } else if (const nlohmann::json* ended = state ? object(*state, "terminated") : nullptr) {
        const auto code = ended->find("exitCode");
        how = absl::StrCat("terminated (", text(*ended, "reason"), ", exit code ",
                           code != ended->end() && code->is_number_integer()
                               ? absl::StrCat(code->get<int64_t>())
                               : std::string("?"),
                           ")");
      }
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": the restored container is ", how, ", not running"));
    }
    return absl::NotFoundError(absl::StrCat(
        what, ": the pod is listed but has no status of container ", restored.container));
  }
  return absl::NotFoundError(
      absl::StrCat(what, ": the kubelet lists no pod ", restored.pod_namespace, "/", restored.pod));
}

}  // namespace codeco::checkpointer
