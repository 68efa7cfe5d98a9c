#include "codeco/kube/http_kube_api.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codeco/common/http_client.h"
#include "codeco/common/status.h"
#include "yaml-cpp/yaml.h"

namespace codeco::kube {
namespace {

namespace fs = std::filesystem;

// Largest token, CA or key file read.
constexpr size_t kMaxCredentialBytes = 1 << 20;

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidFieldError(field, absl::StrCat("cannot read ", path));
  std::string text(kMaxCredentialBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxCredentialBytes) {
    return InvalidFieldError(field,
                             absl::StrCat(path, " is larger than ", kMaxCredentialBytes, " bytes"));
  }
  return text;
}

// A named entry ("clusters", "users", "contexts") of a kubeconfig.
absl::StatusOr<YAML::Node> Named(const YAML::Node& config, const std::string& list,
                                 const std::string& name, const std::string& inner) {
  const YAML::Node entries = config[list];
  if (entries && entries.IsSequence()) {
    for (size_t i = 0; i < entries.size(); ++i) {
      const YAML::Node e = entries[i];
      if (e.IsMap() && e["name"] && e["name"].as<std::string>("") == name) {
        const YAML::Node body = e[inner];
        if (!body || !body.IsMap()) {
          return InvalidFieldError(absl::StrCat(list, "[", i, "].", inner), "is required");
        }
        return body;
      }
    }
  }
  return InvalidFieldError(list, absl::StrCat("has no entry named \"", name, "\""));
}

std::string Text(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

bool IsLoopbackUrl(const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) return false;
  return absl::StartsWith(rest, "127.") || absl::StartsWith(rest, "localhost:") ||
         absl::StartsWith(rest, "[::1]");
}

absl::Status CheckServer(const std::string& server, const std::string& field) {
  if (server.empty()) return InvalidFieldError(field, "is required");
  if (absl::StartsWith(server, "https://") || IsLoopbackUrl(server)) return absl::OkStatus();
  return InvalidFieldError(field, absl::StrCat("\"", server,
                                               "\" must be https:// (plain http:// only on "
                                               "loopback)"));
}

absl::StatusOr<std::string> Base64Field(const YAML::Node& map, const char* key,
                                        const std::string& field) {
  std::string decoded;
  if (!absl::Base64Unescape(Text(map, key), &decoded)) {
    return InvalidFieldError(field, "is not base64");
  }
  return decoded;
}

}  // namespace

absl::StatusOr<KubeEndpoint> LoadKubeconfig(const std::string& path, const std::string& context) {
  YAML::Node config;
  try {
    config = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": ", e.what()));
  }
  if (!config.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": not a YAML map"));
  }
  auto in_file = [&](absl::Status s) {
    return absl::Status(s.code(), absl::StrCat("kubeconfig ", path, ": ", s.message()));
  };
  const fs::path dir = fs::path(path).parent_path();
  auto resolve = [&](const std::string& file) {
    return fs::path(file).is_absolute() ? file : (dir / file).string();
  };
  const std::string name = context.empty() ? Text(config, "current-context") : context;
  if (name.empty()) return in_file(InvalidFieldError("current-context", "is required"));
  absl::StatusOr<YAML::Node> ctx = Named(config, "contexts", name, "context");
  if (!ctx.ok()) return in_file(ctx.status());
  absl::StatusOr<YAML::Node> cluster = Named(config, "clusters", Text(*ctx, "cluster"), "cluster");
  if (!cluster.ok()) return in_file(cluster.status());
  absl::StatusOr<YAML::Node> user = Named(config, "users", Text(*ctx, "user"), "user");
  if (!user.ok()) return in_file(user.status());

  KubeEndpoint out;
  out.ns = Text(*ctx, "namespace");
  out.server = std::string(absl::StripSuffix(Text(*cluster, "server"), "/"));
  if (absl::Status s = CheckServer(out.server, "cluster.server"); !s.ok()) return in_file(s);
  if (Text(*cluster, "insecure-skip-tls-verify") == "true") {
    return in_file(InvalidFieldError("cluster.insecure-skip-tls-verify",
                                     "is not supported: give certificate-authority"));
  }
  if (!Text(*cluster, "certificate-authority-data").empty()) {
    absl::StatusOr<std::string> ca =
        Base64Field(*cluster, "certificate-authority-data", "cluster.certificate-authority-data");
    if (!ca.ok()) return in_file(ca.status());
    out.ca_pem = std::move(*ca);
  } else if (!Text(*cluster, "certificate-authority").empty()) {
    out.ca_file = resolve(Text(*cluster, "certificate-authority"));
  }
  for (const char* plugin : {"exec", "auth-provider"}) {
    if ((*user)[plugin]) {
      return in_file(InvalidFieldError(absl::StrCat("user.", plugin),
                                       "credential plugins are not supported: use a token, a "
                                       "tokenFile or a client certificate"));
    }
  }
  out.token = Text(*user, "token");
  if (!Text(*user, "tokenFile").empty()) out.token_file = resolve(Text(*user, "tokenFile"));
  if (!Text(*user, "client-certificate-data").empty()) {
    absl::StatusOr<std::string> cert =
        Base64Field(*user, "client-certificate-data", "user.client-certificate-data");
    if (!cert.ok()) return in_file(cert.status());
    out.client_cert_pem = std::move(*cert);
  } else if (!Text(*user, "client-certificate").empty()) {
    out.client_cert_file = resolve(Text(*user, "client-certificate"));
  }
  if (!Text(*user, "client-key-data").empty()) {
    absl::StatusOr<std::string> key = Base64Field(*user, "client-key-data", "user.client-key-data");
    if (!key.ok()) return in_file(key.status());
    out.client_key_pem = std::move(*key);
  } else if (!Text(*user, "client-key").empty()) {
    out.client_key_file = resolve(Text(*user, "client-key"));
  }
  const bool has_cert = !out.client_cert_pem.empty() || !out.client_cert_file.empty();
  const bool has_key = !out.client_key_pem.empty() || !out.client_key_file.empty();
  if (has_cert != has_key) {
    return in_file(InvalidFieldError(has_cert ? "user.client-key" : "user.client-certificate",
                                     "is required with the other half of the key pair"));
  }
  if (!has_cert && out.token.empty() && out.token_file.empty()) {
    return in_file(InvalidFieldError(
        "user", "names no credential (token, tokenFile or client certificate and key)"));
  }
  return out;
}

absl::StatusOr<KubeEndpoint> InClusterEndpoint(const std::string& account_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return absl::FailedPreconditionError(
        "not in a Kubernetes pod (KUBERNETES_SERVICE_HOST and _PORT are unset): set "
        "kube.kubeconfig");
  }
  KubeEndpoint out;
  const std::string h = host;
  out.server =
      absl::StrCat("https://", h.find(':') != std::string::npos ? "[" + h + "]" : h, ":", port);
  out.token_file = account_dir + "/token";
  out.ca_file = account_dir + "/ca.crt";
  RETURN_IF_ERROR(ReadSmallFile(out.token_file, "service account token").status());
  absl::StatusOr<std::string> ns = ReadSmallFile(account_dir + "/namespace", "namespace");
  if (ns.ok()) out.ns = std::string(absl::StripAsciiWhitespace(*ns));
  return out;
}

void AddKubeConfig(ConfigSchema& schema) {
  schema
      .Add({"kube.kubeconfig",
            ConfigType::kString,
            "",
            {},
            false,
            "kubeconfig file of the cluster (empty: the pod's service account)"})
      .Add({"kube.service_account_dir",
            ConfigType::kString,
            "/var/run/secrets/kubernetes.io/serviceaccount",
            {},
            false,
            "token, ca.crt and namespace of the pod's service account (without kubeconfig)"})
      .Add({"kube.context",
            ConfigType::kString,
            "",
            {},
            false,
            "context of the kubeconfig (empty: its current-context)"})
      .Add({"kube.call_timeout",
            ConfigType::kDuration,
            "10s",
            {},
            false,
            "timeout of one kube-apiserver call"})
      .Add({"kube.watch_timeout",
            ConfigType::kDuration,
            "5m",
            {},
            false,
            "each kube watch is renewed after this long (timeoutSeconds)"});
}

absl::StatusOr<KubeClientOptions> KubeClientOptionsFromConfig(const Config& config) {
  KubeClientOptions options;
  options.call_timeout = config.GetDuration("kube.call_timeout");
  options.watch_timeout = config.GetDuration("kube.watch_timeout");
  for (const auto& [key, d] : {std::pair{"kube.call_timeout", options.call_timeout},
                               std::pair{"kube.watch_timeout", options.watch_timeout}}) {
    if (d < absl::Seconds(1) || d > absl::Hours(1)) return InvalidFieldError(key, "must be 1s-1h");
  }
  return options;
}

std::unique_ptr<HttpKubeApi> MakeHttpKubeApi(KubeEndpoint endpoint,
                                             const KubeClientOptions& options) {
  return std::make_unique<HttpKubeApi>(std::move(endpoint),
                                       options.watch_timeout + absl::Minutes(1));
}

absl::StatusOr<KubeEndpoint> KubeEndpointFromConfig(const Config& config) {
  const std::string& kubeconfig = config.GetString("kube.kubeconfig");
  if (kubeconfig.empty()) return InClusterEndpoint(config.GetString("kube.service_account_dir"));
  return LoadKubeconfig(kubeconfig, config.GetString("kube.context"));
}

HttpKubeApi::HttpKubeApi(KubeEndpoint endpoint, absl::Duration stream_timeout)
    : endpoint_(std::move(endpoint)), stream_timeout_(stream_timeout) {}

namespace {

absl::StatusOr<HttpRequest> BaseRequest(const KubeEndpoint& endpoint, const std::string& method,
                                        const std::string& path) {
  HttpRequest request;
  request.method = method;
  request.url = endpoint.server + path;
  request.ca_file = endpoint.ca_file;
  request.ca_pem = endpoint.ca_pem;
  request.client_cert_file = endpoint.client_cert_file;
  request.client_key_file = endpoint.client_key_file;
  request.client_cert_pem = endpoint.client_cert_pem;
  request.client_key_pem = endpoint.client_key_pem;
  request.headers.emplace_back("Accept", "application/json");
  std::string token = endpoint.token;
  if (!endpoint.token_file.empty()) {
    ASSIGN_OR_RETURN(token, ReadSmallFile(endpoint.token_file, "kube token file"));
    token = std::string(absl::StripAsciiWhitespace(token));
  }
  if (!token.empty()) request.headers.emplace_back("Authorization", "Bearer " + token);
  return request;
}

}  // namespace

absl::StatusOr<KubeAnswer> HttpKubeApi::Call(const std::string& method, const std::string& path,
                                             const std::string& body, absl::Duration timeout) {
  ASSIGN_OR_RETURN(HttpRequest request, BaseRequest(endpoint_, method, path));
  request.body = body;
  // A PATCH is a JSON merge patch (RFC 7386), which every resource takes,
  // custom ones included (a strategic merge patch does not apply to them).
  if (!body.empty()) {
    request.content_type = method == "PATCH" ? "application/merge-patch+json" : "application/json";
  }
  request.timeout = timeout;
  request.connect_timeout = std::min(timeout, absl::Seconds(5));
  ASSIGN_OR_RETURN(HttpAnswer answer, SendHttp(request, "kube-apiserver"));
  return KubeAnswer{answer.status, std::move(answer.body)};
}

absl::StatusOr<KubeAnswer> HttpKubeApi::Stream(const std::string& path,
                                               const std::function<bool(std::string_view)>& on_line,
                                               const std::function<bool()>& cancelled) {
  ASSIGN_OR_RETURN(HttpRequest request, BaseRequest(endpoint_, "GET", path));
  request.timeout = stream_timeout_;
  request.connect_timeout = absl::Seconds(5);
  ASSIGN_OR_RETURN(HttpAnswer answer,
                   StreamHttpLines(request, "kube-apiserver watch", on_line, cancelled));
  return KubeAnswer{answer.status, std::move(answer.body)};
}

}  // namespace codeco::kube
