#include "codeco/common/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace codeco {
namespace {

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
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

long Milliseconds(absl::Duration d) {
  return static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

}  // namespace

absl::StatusOr<HttpAnswer> SendHttpPost(const HttpPost& post, const std::string& what) {
  const std::string who = absl::StrCat(what, " ", post.url);
  if (!absl::StartsWith(post.url, "http://") && !absl::StartsWith(post.url, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": not an http:// or https:// URL"));
  }
  InitCurlOnce();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  HttpAnswer answer;
  WriteContext context{&answer.body, post.max_response_bytes};
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_URL, post.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, Milliseconds(post.timeout));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   Milliseconds(std::min(post.connect_timeout, post.timeout)));
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post.body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post.body.size()));
  if (!post.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, post.ca_file.c_str());
  // gzip on the wire; the size cap applies to the decompressed bytes.
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(post.max_response_bytes));
  // No "Expect: 100-continue" round trip before a large body.
  const std::string type = absl::StrCat("Content-Type: ", post.content_type);
  curl_slist* headers = curl_slist_append(nullptr, "Expect:");
  headers = curl_slist_append(headers, type.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &context);
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);

  if (context.over_limit || code == CURLE_FILESIZE_EXCEEDED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        who, ": the answer is larger than max_response_bytes = ", post.max_response_bytes));
  }
  if (code == CURLE_OK) return answer;
  const std::string detail = error[0] != '\0' ? error : curl_easy_strerror(code);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat(
          who, ": no answer within ", absl::FormatDuration(post.timeout), " (", detail, ")"));
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return absl::UnavailableError(absl::StrCat(who, ": cannot connect: ", detail));
    default:
      return absl::UnavailableError(absl::StrCat(who, ": ", detail));
  }
}

}  // namespace codeco
