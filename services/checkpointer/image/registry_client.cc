#include "checkpointer/image/registry_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codeco/common/status.h"
#include "nlohmann/json.hpp"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;

// Repository path components: lowercase alphanumerics with ".", "_", "__" or
// "-" runs between them (distribution-spec's name grammar).
bool IsRepositoryComponent(absl::string_view c) {
  if (c.empty() || !std::isalnum(static_cast<unsigned char>(c.front())) ||
      !std::isalnum(static_cast<unsigned char>(c.back()))) {
    return false;
  }
  return std::all_of(c.begin(), c.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
           ch == '-';
  });
}

bool IsTag(absl::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  if (!(std::isalnum(static_cast<unsigned char>(t.front())) || t.front() == '_')) return false;
  return std::all_of(t.begin(), t.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
  });
}

bool IsRegistryHost(absl::string_view host) {
  if (host.empty()) return false;
  const bool explicit_registry = absl::StrContains(host, '.') || absl::StrContains(host, ':') ||
                                 host == "localhost";
  if (!explicit_registry) return false;
  return std::all_of(host.begin(), host.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == ':' ||
           ch == '[' || ch == ']';
  });
}

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One HTTP exchange.
struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;
  // The body sent (POST, PUT, PATCH); not owned.
  absl::string_view body;
  // Where the response body goes; returns false to abort. Unset: kept in
  // HttpResult::body up to body_limit bytes.
  std::function<bool(absl::string_view)> sink;
  int64_t body_limit = 1 << 20;
};

struct HttpResult {
  CURLcode code = CURLE_OK;
  std::string curl_error;
  long status = 0;
  std::string body;
  bool body_over_limit = false;
  // Lowercase names, of the last response (after redirects).
  std::map<std::string, std::string> headers;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

HttpResult Perform(const RegistryOptions& options, const HttpRequest& request) {
  GlobalInitOnce();
  HttpResult result;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    result.code = CURLE_FAILED_INIT;
    result.curl_error = "curl_easy_init failed";
    return result;
  }
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options.timeout)));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  // Registries may answer a blob GET with a redirect to their storage.
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.method == "GET" ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  if (!options.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  if (!options.cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, options.cert_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, options.key_file.c_str());
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  // No "Expect: 100-continue" round trip before each chunk.
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  struct Context {
    const HttpRequest* request;
    HttpResult* result;
  } context{&request, &result};
  curl_easy_setopt(
      curl, CURLOPT_HEADERFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* ctx = static_cast<Context*>(user);
        absl::string_view line(data, size * n);
        if (absl::StartsWith(line, "HTTP/")) {
          ctx->result->headers.clear();  // a new response (after a redirect)
          // "HTTP/1.1 404 Not Found": the status, so the body goes where it belongs.
          std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
          long status = 0;
          if (words.size() >= 2 && absl::SimpleAtoi(words[1], &status)) ctx->result->status = status;
          return size * n;
        }
        const size_t colon = line.find(':');
        if (colon != absl::string_view::npos) {
          std::string name = absl::AsciiStrToLower(line.substr(0, colon));
          std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
          ctx->result->headers[name] = value;
        }
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &context);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* ctx = static_cast<Context*>(user);
        absl::string_view chunk(data, size * n);
        // A success's body goes to the sink; an error's is kept to report.
        if (ctx->request->sink && ctx->result->status / 100 == 2) {
          return ctx->request->sink(chunk) ? size * n : 0;
        }
        if (static_cast<int64_t>(ctx->result->body.size() + chunk.size()) >
            ctx->request->body_limit) {
          ctx->result->body_over_limit = true;
          return 0;  // aborts the transfer
        }
        ctx->result->body.append(chunk.data(), chunk.size());
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &context);
  result.code = curl_easy_perform(curl);
  if (result.code != CURLE_OK) {
    result.curl_error = error[0] != '\0' ? error : curl_easy_strerror(result.code);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return result;
}

// The registry's own error codes ("BLOB_UNKNOWN: blob unknown to registry").
std::string RegistryErrors(const std::string& body) {
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("errors") ||
      !doc["errors"].is_array()) {
    return body.size() > 200 ? body.substr(0, 200) + "…" : body;
  }
  std::vector<std::string> parts;
  for (const auto& e : doc["errors"]) {
    if (!e.is_object()) continue;
    parts.push_back(absl::StrCat(e.value("code", "UNKNOWN"), ": ", e.value("message", "")));
  }
  return absl::StrJoin(parts, "; ");
}

// OK for the `ok` statuses; otherwise the status that says what failed.
absl::Status ExpectStatus(const HttpResult& r, const std::string& what,
                          std::initializer_list<long> ok) {
  if (r.code != CURLE_OK && !(r.code == CURLE_WRITE_ERROR && r.body_over_limit)) {
    return absl::UnavailableError(absl::StrCat(what, ": registry unreachable: ", r.curl_error));
  }
  if (r.body_over_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": the answer is larger than allowed"));
  }
  if (std::find(ok.begin(), ok.end(), r.status) != ok.end()) return absl::OkStatus();
  const std::string detail = absl::StrCat(what, ": HTTP ", r.status,
                                          r.body.empty() ? "" : ": " + RegistryErrors(r.body));
  if (r.status == 401 || r.status == 403) return absl::PermissionDeniedError(detail);
  if (r.status == 404) return absl::NotFoundError(detail);
  if (r.status == 429 || r.status >= 500) return absl::UnavailableError(detail);
  if (r.status == 400 || r.status == 405 || r.status == 413 || r.status == 416) {
    return absl::FailedPreconditionError(detail);
  }
  return absl::UnknownError(detail);
}

}  // namespace

std::string ImageReference::ToString() const {
  std::string out = absl::StrCat(registry, "/", repository);
  if (!digest.empty()) return absl::StrCat(out, "@", digest);
  if (!tag.empty()) absl::StrAppend(&out, ":", tag);
  return out;
}

absl::StatusOr<ImageReference> ParseImageReference(absl::string_view text, const std::string& field,
                                                   bool repository_only) {
  if (text.empty()) return InvalidFieldError(field, "is required");
  if (text.size() > 1024) return InvalidFieldError(field, "is longer than 1024 bytes");
  ImageReference ref;
  absl::string_view rest = text;
  if (const size_t at = rest.find('@'); at != absl::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (!IsSha256Digest(ref.digest)) {
      return InvalidFieldError(field, absl::StrCat("digest \"", ref.digest,
                                                   "\" must be sha256: and 64 lowercase hex"));
    }
  }
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) {
    return InvalidFieldError(
        field, absl::StrCat("\"", text, "\" names no registry (write host:port/repository)"));
  }
  ref.registry = std::string(rest.substr(0, slash));
  rest = rest.substr(slash + 1);
  if (!IsRegistryHost(ref.registry)) {
    return InvalidFieldError(field, absl::StrCat("registry \"", ref.registry,
                                                 "\" must be a host with a dot or a port, or "
                                                 "localhost"));
  }
  // A tag follows the last ":" after the last "/".
  const size_t last_slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos &&
      (last_slash == absl::string_view::npos || colon > last_slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (!IsTag(ref.tag)) {
      return InvalidFieldError(field, absl::StrCat("tag \"", ref.tag, "\" is not a valid tag"));
    }
  }
  ref.repository = std::string(rest);
  if (ref.repository.empty() || ref.repository.size() > 255) {
    return InvalidFieldError(field, "repository must have 1 to 255 characters");
  }
  for (absl::string_view part : absl::StrSplit(ref.repository, '/')) {
    if (!IsRepositoryComponent(part)) {
      return InvalidFieldError(field, absl::StrCat("repository \"", ref.repository,
                                                   "\" must be lowercase components "
                                                   "[a-z0-9._-] separated by /"));
    }
  }
  if (!repository_only && ref.tag.empty() && ref.digest.empty()) {
    return InvalidFieldError(field, "names no tag and no digest");
  }
  return ref;
}

RegistryClient::RegistryClient(RegistryOptions options) : options_(std::move(options)) {}

absl::Status RegistryClient::Check() const {
  FieldErrors errors;
  if (options_.scheme != "https" && options_.scheme != "http") {
    errors.Add("scheme", "must be https or http");
  }
  if (options_.chunk_bytes < 4096) errors.Add("chunk_bytes", "must be at least 4096");
  if (options_.timeout <= absl::ZeroDuration()) errors.Add("timeout", "must be positive");
  if (options_.max_document_bytes <= 0) errors.Add("max_document_bytes", "must be positive");
  if (options_.cert_file.empty() != options_.key_file.empty()) {
    errors.Add("key_file", "cert_file and key_file go together");
  }
  return errors.ToStatus();
}

std::string RegistryClient::BaseUrl(const ImageReference& reference) const {
  return absl::StrCat(options_.scheme, "://", reference.registry, "/v2/", reference.repository);
}

absl::StatusOr<bool> RegistryClient::HasBlob(const ImageReference& repository,
                                             const std::string& digest) {
  HttpRequest head{.method = "HEAD", .url = absl::StrCat(BaseUrl(repository), "/blobs/", digest)};
  HttpResult r = Perform(options_, head);
  if (r.code == CURLE_OK && r.status == 404) return false;
  RETURN_IF_ERROR(ExpectStatus(r, absl::StrCat("checking blob ", digest, " in ", repository.ToString()),
                        {200}));
  return true;
}

template <typename Read>
absl::StatusOr<bool> RegistryClient::PushBlobFrom(const ImageReference& repository,
                                                  const Descriptor& blob, Read read) {
  if (!IsSha256Digest(blob.digest)) {
    return InvalidFieldError("blob.digest", "must be sha256: and 64 lowercase hex digits");
  }
  ASSIGN_OR_RETURN(bool present, HasBlob(repository, blob.digest));
  if (present) return false;
  const std::string where = absl::StrCat("pushing blob ", blob.digest, " to ",
                                         repository.ToString());
  HttpResult start = Perform(
      options_, HttpRequest{.method = "POST", .url = BaseUrl(repository) + "/blobs/uploads/"});
  RETURN_IF_ERROR(ExpectStatus(start, where + ": starting the upload", {202}));
  auto absolute = [&](const std::string& location) {
    if (absl::StartsWith(location, "http://") || absl::StartsWith(location, "https://")) {
      return location;
    }
    return absl::StrCat(options_.scheme, "://", repository.registry, location);
  };
  std::string location = start.Header("location");
  if (location.empty()) {
    return absl::UnknownError(where + ": the registry gave no upload location");
  }
  location = absolute(location);
  for (int64_t offset = 0; offset < blob.size;) {
    const int64_t n = std::min(options_.chunk_bytes, blob.size - offset);
    ASSIGN_OR_RETURN(absl::string_view chunk, read(offset, n));
    HttpResult patch = Perform(
        options_,
        HttpRequest{.method = "PATCH",
                    .url = location,
                    .headers = {"Content-Type: application/octet-stream",
                                absl::StrCat("Content-Range: ", offset, "-", offset + n - 1)},
                    .body = chunk});
    RETURN_IF_ERROR(ExpectStatus(patch, absl::StrCat(where, ": chunk at byte ", offset), {202}));
    if (!patch.Header("location").empty()) location = absolute(patch.Header("location"));
    offset += n;
  }
  const std::string finish_url =
      absl::StrCat(location, absl::StrContains(location, '?') ? "&" : "?", "digest=", blob.digest);
  HttpResult finish = Perform(
      options_, HttpRequest{.method = "PUT",
                            .url = finish_url,
                            .headers = {"Content-Type: application/octet-stream"}});
  RETURN_IF_ERROR(ExpectStatus(finish, where + ": closing the upload", {201}));
  const std::string stored = finish.Header("docker-content-digest");
  if (!stored.empty() && stored != blob.digest) {
    return absl::DataLossError(
        absl::StrCat(where, ": the registry stored it as ", stored, " instead"));
  }
  return true;
}

absl::StatusOr<bool> RegistryClient::PushBlobFile(const ImageReference& repository,
                                                  const fs::path& file, const Descriptor& blob) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.string()));
  std::string buffer;
  return PushBlobFrom(
      repository, blob, [&](int64_t offset, int64_t n) -> absl::StatusOr<absl::string_view> {
        buffer.resize(static_cast<size_t>(n));
        in.seekg(offset);
        in.read(buffer.data(), n);
        if (in.gcount() != n) {
          return absl::DataLossError(absl::StrCat(file.string(), " is shorter than the ",
                                                  blob.size, " bytes its descriptor says"));
        }
        return absl::string_view(buffer);
      });
}

absl::StatusOr<bool> RegistryClient::PushBlob(const ImageReference& repository,
                                              absl::string_view bytes, const Descriptor& blob) {
  if (static_cast<int64_t>(bytes.size()) != blob.size) {
    return InvalidFieldError("blob.size", absl::StrCat("is ", blob.size, " but the blob has ",
                                                       bytes.size(), " bytes"));
  }
  return PushBlobFrom(repository, blob,
                      [&](int64_t offset, int64_t n) -> absl::StatusOr<absl::string_view> {
                        return bytes.substr(static_cast<size_t>(offset), static_cast<size_t>(n));
                      });
}

absl::StatusOr<std::string> RegistryClient::PushManifest(const ImageReference& reference,
                                                         absl::string_view manifest) {
  if (reference.tag.empty()) return InvalidFieldError("reference", "a manifest is pushed by tag");
  HttpResult r = Perform(options_,
                         HttpRequest{.method = "PUT",
                                     .url = absl::StrCat(BaseUrl(reference), "/manifests/",
                                                         reference.tag),
                                     .headers = {absl::StrCat("Content-Type: ", kManifestMediaType)},
                                     .body = manifest});
  RETURN_IF_ERROR(ExpectStatus(r, absl::StrCat("pushing manifest ", reference.ToString()), {201}));
  const std::string own = DigestOf(manifest);
  const std::string stored = r.Header("docker-content-digest");
  if (!stored.empty() && stored != own) {
    return absl::DataLossError(absl::StrCat("pushing manifest ", reference.ToString(),
                                            ": stored as ", stored, ", sent ", own));
  }
  return own;
}

absl::StatusOr<std::string> RegistryClient::PullManifest(const ImageReference& reference) {
  const std::string what = absl::StrCat("pulling manifest ", reference.ToString());
  HttpResult r = Perform(
      options_,
      HttpRequest{.method = "GET",
                  .url = absl::StrCat(BaseUrl(reference), "/manifests/", reference.ManifestName()),
                  .headers = {absl::StrCat("Accept: ", kManifestMediaType)},
                  .body_limit = options_.max_document_bytes});
  RETURN_IF_ERROR(ExpectStatus(r, what, {200}));
  if (!reference.digest.empty() && DigestOf(r.body) != reference.digest) {
    return absl::DataLossError(absl::StrCat(what, ": content does not match its digest"));
  }
  return std::move(r.body);
}

absl::StatusOr<std::string> RegistryClient::PullBlob(const ImageReference& repository,
                                                     const Descriptor& blob) {
  const std::string what = absl::StrCat("pulling blob ", blob.digest, " of ", repository.ToString());
  if (blob.size > options_.max_document_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": ", blob.size, " bytes is more than ", options_.max_document_bytes));
  }
  HttpResult r = Perform(options_, HttpRequest{.method = "GET",
                                               .url = absl::StrCat(BaseUrl(repository), "/blobs/",
                                                                   blob.digest),
                                               .body_limit = blob.size});
  RETURN_IF_ERROR(ExpectStatus(r, what, {200}));
  if (static_cast<int64_t>(r.body.size()) != blob.size || DigestOf(r.body) != blob.digest) {
    return absl::DataLossError(absl::StrCat(what, ": content does not match its digest or size"));
  }
  return std::move(r.body);
}

absl::Status RegistryClient::PullBlobTo(const ImageReference& repository, const Descriptor& blob,
                                        const std::function<bool(absl::string_view)>& sink) {
  const std::string what = absl::StrCat("pulling blob ", blob.digest, " of ", repository.ToString());
  Sha256 hash;
  int64_t received = 0;
  bool too_long = false;
  bool refused = false;
  HttpRequest get{.method = "GET", .url = absl::StrCat(BaseUrl(repository), "/blobs/", blob.digest)};
  get.sink = [&](absl::string_view chunk) {
    received += static_cast<int64_t>(chunk.size());
    if (received > blob.size) {
      too_long = true;
      return false;
    }
    hash.Update(chunk);
    refused = !sink(chunk);
    return !refused;
  };
  HttpResult r = Perform(options_, get);
  if (too_long) {
    return absl::DataLossError(
        absl::StrCat(what, ": more bytes than the ", blob.size, " its descriptor says"));
  }
  if (refused) return absl::InternalError(absl::StrCat(what, ": the bytes could not be kept"));
  RETURN_IF_ERROR(ExpectStatus(r, what, {200}));
  if (received != blob.size) {
    return absl::DataLossError(absl::StrCat(what, ": got ", received, " of ", blob.size, " bytes"));
  }
  if (hash.Finish() != blob.digest) {
    return absl::DataLossError(absl::StrCat(what, ": content does not match its digest"));
  }
  return absl::OkStatus();
}

absl::Status RegistryClient::PullBlobToFile(const ImageReference& repository,
                                            const Descriptor& blob, const fs::path& out) {
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  absl::Status status =
      file ? PullBlobTo(repository, blob,
                        [&](absl::string_view chunk) {
                          file.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
                          return file.good();
                        })
           : absl::InternalError(absl::StrCat("cannot write ", out.string()));
  if (status.ok()) {
    file.close();
    if (!file) status = absl::InternalError(absl::StrCat("writing ", out.string(), " failed"));
  }
  if (!status.ok()) {
    std::error_code ignored;
    fs::remove(out, ignored);
  }
  return status;
}

absl::Status RegistryClient::DeleteManifest(const ImageReference& repository,
                                            const std::string& digest) {
  if (!IsSha256Digest(digest)) {
    return InvalidFieldError("digest", "must be sha256: and 64 lowercase hex digits");
  }
  HttpResult r = Perform(options_, HttpRequest{.method = "DELETE",
                                               .url = absl::StrCat(BaseUrl(repository),
                                                                   "/manifests/", digest)});
  return ExpectStatus(r, absl::StrCat("deleting manifest ", digest, " of ", repository.ToString()),
               {202});
}

}  // namespace codeco::checkpointer
