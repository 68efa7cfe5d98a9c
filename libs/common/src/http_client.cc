#include "codeco/common/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace codeco {
namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

long Milliseconds(absl::Duration d) {
  return static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

// One easy handle and what it points to; the strings it was given live in
// the caller's HttpRequest (or are copied by libcurl: blobs, CUSTOMREQUEST).
struct Transfer {
  Transfer() = default;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() {
    if (curl != nullptr) curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
  }

  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {0};
};

bool HasLineBreak(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

// Checks `request` and sets up `t` for it (everything but the write callback).
absl::Status Prepare(const HttpRequest& request, const std::string& who, Transfer& t) {
  if (!absl::StartsWith(request.url, "http://") && !absl::StartsWith(request.url, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": not an http:// or https:// URL"));
  }
  const std::string& method = request.method;
  if (method != "GET" && method != "POST" && method != "PUT" && method != "PATCH" &&
      method != "DELETE") {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": method \"", method, "\" is not one of GET, POST, PUT, PATCH, DELETE"));
  }
  const bool has_cert = !request.client_cert_file.empty() || !request.client_cert_pem.empty();
  const bool has_key = !request.client_key_file.empty() || !request.client_key_pem.empty();
  if (has_cert != has_key) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, has_cert ? ": a client certificate without its key (client_key_file/client_key_pem)"
                      : ": a client key without its certificate "
                        "(client_cert_file/client_cert_pem)"));
  }
  if (!request.client_cert_file.empty() && !request.client_cert_pem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": client_cert_file and client_cert_pem are both set"));
  }
  if (!request.client_key_file.empty() && !request.client_key_pem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": client_key_file and client_key_pem are both set"));
  }
  // A header split over lines would smuggle further headers into the request.
  if (HasLineBreak(request.content_type)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": content_type has a line break"));
  }
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value) ||
        name.find_first_of(": \t") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": headers: \"", name, "\" is not a header name and value"));
    }
  }

  InitCurlOnce();
  t.curl = curl_easy_init();
  if (t.curl == nullptr) return absl::InternalError(absl::StrCat(who, ": curl_easy_init failed"));
  CURL* curl = t.curl;
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, t.error);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, Milliseconds(request.timeout));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   Milliseconds(std::min(request.connect_timeout, request.timeout)));
  // gzip on the wire; the size cap applies to the decompressed bytes.
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");

  // The method, and the body when there is one.
  const bool send_body =
      method == "POST" || method == "PUT" || method == "PATCH" || !request.body.empty();
  if (send_body) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.c_str());
  }
  if (method != "POST" && (method != "GET" || send_body)) {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }

  // No "Expect: 100-continue" round trip before a large body; no
  // Content-Type but the one asked for (libcurl adds a form type to bodies).
  t.headers = curl_slist_append(t.headers, "Expect:");
  t.headers = curl_slist_append(t.headers,
                                request.content_type.empty()
                                    ? "Content-Type:"
                                    : absl::StrCat("Content-Type: ", request.content_type).c_str());
  for (const auto& [name, value] : request.headers) {
    // "Name;" is how libcurl sends a header with an empty value.
    const std::string line =
        value.empty() ? absl::StrCat(name, ";") : absl::StrCat(name, ": ", value);
    t.headers = curl_slist_append(t.headers, line.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, t.headers);

  // TLS. Peer and host verification stay on (libcurl's defaults).
  if (!request.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, request.ca_file.c_str());
  auto blob = [](const std::string& pem) {
    curl_blob b;
    b.data = const_cast<char*>(pem.data());
    b.len = pem.size();
    b.flags = CURL_BLOB_COPY;
    return b;
  };
  if (!request.ca_pem.empty()) {
    curl_blob b = blob(request.ca_pem);
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &b);
  }
  if (!request.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, request.client_cert_file.c_str());
  }
  if (!request.client_cert_pem.empty()) {
    curl_blob b = blob(request.client_cert_pem);
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &b);
  }
  if (has_cert) curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  if (!request.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, request.client_key_file.c_str());
  }
  if (!request.client_key_pem.empty()) {
    curl_blob b = blob(request.client_key_pem);
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &b);
  }
  if (has_key) curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  return absl::OkStatus();
}

// The status for a transfer that ended with `code` (not CURLE_OK).
absl::Status TransferError(CURLcode code, const char* error, const std::string& who,
                           const std::string& timeout_text) {
  const std::string detail = error[0] != '\0' ? error : curl_easy_strerror(code);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat(who, ": ", timeout_text, " (", detail, ")"));
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return absl::UnavailableError(absl::StrCat(who, ": cannot connect: ", detail));
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_PEER_FAILED_VERIFICATION:
      return absl::UnavailableError(absl::StrCat(who, ": TLS: ", detail));
    default:
      return absl::UnavailableError(absl::StrCat(who, ": ", detail));
  }
}

std::string ContentType(CURL* curl) {
  char* type = nullptr;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
  return type != nullptr ? std::string(type) : std::string();
}

absl::Status OverCap(const std::string& who, size_t cap, const char* what) {
  return absl::ResourceExhaustedError(
      absl::StrCat(who, ": ", what, " is larger than max_response_bytes = ", cap));
}

struct WriteContext {
  std::string* body;
  size_t limit;
  bool over_limit = false;
};

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  auto* ctx = static_cast<WriteContext*>(user);
  const size_t bytes = size * n;
  if (ctx->body->size() + bytes > ctx->limit) {
    ctx->over_limit = true;
    return 0;  // aborts the transfer: memory stays bounded whatever the server sends
  }
  ctx->body->append(data, bytes);
  return bytes;
}

// The state of one StreamHttpLines call, shared with libcurl's callbacks.
struct StreamContext {
  CURL* curl;
  HttpAnswer* answer;
  size_t limit;
  const HttpLineHandler* on_line;
  const std::function<bool()>* cancelled;
  // Set on the first body bytes: whether they go to on_line (2xx).
  bool decided = false;
  bool lines = false;
  std::string partial;  // the line being received
  bool over_limit = false;
  bool stopped = false;  // on_line returned false
  bool was_cancelled = false;

  bool Cancelled() {
    if (!was_cancelled && *cancelled && (*cancelled)()) was_cancelled = true;
    return was_cancelled;
  }

  // Passes a complete line (without '\n') to on_line; false to stop.
  bool Deliver(std::string& line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > limit) {
      over_limit = true;
      return false;
    }
    if (!(*on_line)(std::string_view(line))) {
      stopped = true;
      return false;
    }
    line.clear();
    return true;
  }
};

size_t WriteLines(char* data, size_t size, size_t n, void* user) {
  auto* ctx = static_cast<StreamContext*>(user);
  const size_t bytes = size * n;
  if (!ctx->decided) {
    ctx->decided = true;
    curl_easy_getinfo(ctx->curl, CURLINFO_RESPONSE_CODE, &ctx->answer->status);
    ctx->lines = ctx->answer->status >= 200 && ctx->answer->status < 300;
  }
  if (!ctx->lines) {
    if (ctx->answer->body.size() + bytes > ctx->limit) {
      ctx->over_limit = true;
      return 0;
    }
    ctx->answer->body.append(data, bytes);
    return bytes;
  }
  const char* at = data;
  const char* const end = data + bytes;
  while (at < end) {
    const char* newline = static_cast<const char*>(std::memchr(at, '\n', end - at));
    const char* stop = newline != nullptr ? newline : end;
    // Room for the '\r' of a "\r\n" that Deliver strips.
    if (ctx->partial.size() + (stop - at) > ctx->limit + 1) {
      ctx->over_limit = true;
      return 0;
    }
    ctx->partial.append(at, stop - at);
    if (newline == nullptr) break;
    if (!ctx->Deliver(ctx->partial)) return 0;
    at = newline + 1;
  }
  return bytes;
}

int StreamProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<StreamContext*>(user)->Cancelled() ? 1 : 0;
}

}  // namespace

absl::StatusOr<HttpAnswer> SendHttp(const HttpRequest& request, const std::string& what) {
  const std::string who = absl::StrCat(what, " ", request.url);
  Transfer t;
  if (absl::Status prepared = Prepare(request, who, t); !prepared.ok()) return prepared;
  HttpAnswer answer;
  WriteContext context{&answer.body, request.max_response_bytes};
  curl_easy_setopt(t.curl, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(request.max_response_bytes));
  curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, &WriteBody);
  curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &context);
  const CURLcode code = curl_easy_perform(t.curl);
  curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &answer.status);
  answer.content_type = ContentType(t.curl);

  if (context.over_limit || code == CURLE_FILESIZE_EXCEEDED) {
    return OverCap(who, request.max_response_bytes, "the answer");
  }
  if (code == CURLE_OK) return answer;
  return TransferError(code, t.error, who,
                       absl::StrCat("no answer within ", absl::FormatDuration(request.timeout)));
}

absl::StatusOr<HttpAnswer> StreamHttpLines(const HttpRequest& request, const std::string& what,
                                           const HttpLineHandler& on_line,
                                           const std::function<bool()>& cancelled) {
  const std::string who = absl::StrCat(what, " ", request.url);
  Transfer t;
  if (absl::Status prepared = Prepare(request, who, t); !prepared.ok()) return prepared;
  HttpAnswer answer;
  StreamContext context{t.curl, &answer, request.max_response_bytes, &on_line, &cancelled};
  curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, &WriteLines);
  curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &context);
  // libcurl's own progress calls notice `cancelled` too (about once a
  // second while idle); the multi loop below is what bounds it to 100 ms.
  curl_easy_setopt(t.curl, CURLOPT_XFERINFOFUNCTION, &StreamProgress);
  curl_easy_setopt(t.curl, CURLOPT_XFERINFODATA, &context);
  curl_easy_setopt(t.curl, CURLOPT_NOPROGRESS, 0L);

  CURLM* multi = curl_multi_init();
  if (multi == nullptr) return absl::InternalError(absl::StrCat(who, ": curl_multi_init failed"));
  CURLcode code = CURLE_OK;
  std::string multi_error;
  if (CURLMcode added = curl_multi_add_handle(multi, t.curl); added != CURLM_OK) {
    curl_multi_cleanup(multi);
    return absl::InternalError(
        absl::StrCat(who, ": curl_multi_add_handle: ", curl_multi_strerror(added)));
  }
  for (;;) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc == CURLM_OK && running == 0) {
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == t.curl) code = msg->data.result;
      }
      break;
    }
    if (mc == CURLM_OK && !context.Cancelled()) {
      mc = curl_multi_poll(multi, nullptr, 0, 100, nullptr);
    }
    if (mc != CURLM_OK) {
      multi_error = curl_multi_strerror(mc);
      break;
    }
    if (context.was_cancelled) break;
  }
  curl_multi_remove_handle(multi, t.curl);
  curl_multi_cleanup(multi);
  if (answer.status == 0) curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &answer.status);
  answer.content_type = ContentType(t.curl);

  if (context.stopped) return answer;
  if (context.over_limit) {
    return OverCap(who, request.max_response_bytes,
                   context.lines ? "a line of the answer" : "the answer");
  }
  if (context.was_cancelled) return absl::CancelledError(absl::StrCat(who, ": cancelled"));
  if (!multi_error.empty()) return absl::InternalError(absl::StrCat(who, ": ", multi_error));
  if (code != CURLE_OK) {
    return TransferError(
        code, t.error, who,
        absl::StrCat("the stream did not end within ", absl::FormatDuration(request.timeout)));
  }
  // The server closed the stream: its last line may lack the '\n'.
  if (context.lines && !context.partial.empty()) {
    if (!context.Deliver(context.partial) && context.over_limit) {
      return OverCap(who, request.max_response_bytes, "a line of the answer");
    }
  }
  return answer;
}

}  // namespace codeco
