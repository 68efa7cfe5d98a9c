#include "http_get.h"

#include <catch2/catch.hpp>
#include <curl/curl.h>

namespace codeco::testing {

HttpResponse HttpGet(const std::string& url) {
  HttpResponse response;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* out) {
        static_cast<std::string*>(out)->append(data, size * n);
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    char* type = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
    if (type != nullptr) response.content_type = type;
  }
  curl_easy_cleanup(curl);
  INFO(url);
  REQUIRE(rc == CURLE_OK);
  return response;
}

}  // namespace codeco::testing
