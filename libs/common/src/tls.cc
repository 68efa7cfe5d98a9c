#include "codeco/common/tls.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/status.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace codeco {
namespace {

constexpr std::string_view kSpiffePrefix = "spiffe://codeco/cluster/";

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

std::shared_ptr<grpc::experimental::CertificateProviderInterface> Provider(const TlsFiles& f) {
  auto seconds = static_cast<unsigned int>(absl::ToInt64Seconds(f.refresh_interval));
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      f.key_file, f.cert_file, f.ca_file, seconds < 1 ? 1 : seconds);
}

}  // namespace

absl::StatusOr<SpiffeIdentity> ParseSpiffeId(std::string_view uri) {
  if (!uri.starts_with(kSpiffePrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a codeco SPIFFE ID (want ", std::string(kSpiffePrefix),
                     "<cluster>/<service>): ", std::string(uri)));
  }
  std::vector<std::string> parts =
      absl::StrSplit(std::string(uri.substr(kSpiffePrefix.size())), '/');
  if (parts.size() != 2 || !IsDnsLabel(parts[0]) || !IsDnsLabel(parts[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("SPIFFE ID needs <cluster>/<service> as DNS labels: ", std::string(uri)));
  }
  return SpiffeIdentity{parts[0], parts[1]};
}

std::string SpiffeId(const std::string& cluster, const std::string& service) {
  return absl::StrCat(std::string(kSpiffePrefix), cluster, "/", service);
}

absl::Status CheckTlsFiles(const TlsFiles& files) {
  FieldErrors errors;
  auto check = [&](const char* key, const std::string& path, const char* marker) {
    if (path.empty()) {
      errors.Add(key, "required");
      return;
    }
    std::ifstream in(path);
    if (!in) {
      errors.Add(key, absl::StrCat("cannot read ", path));
      return;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    if (buffer.str().find(marker) == std::string::npos) {
      errors.Add(key, absl::StrCat(path, " holds no PEM ", marker));
    }
  };
  check("tls.ca_file", files.ca_file, "CERTIFICATE");
  check("tls.cert_file", files.cert_file, "CERTIFICATE");
  check("tls.key_file", files.key_file, "PRIVATE KEY");
  return errors.ToStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  RETURN_IF_ERROR(CheckTlsFiles(files));
  grpc::experimental::TlsServerCredentialsOptions options(Provider(files));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto creds = grpc::experimental::TlsServerCredentials(options);
  if (creds == nullptr) return absl::InternalError("cannot build TLS server credentials");
  return creds;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  RETURN_IF_ERROR(CheckTlsFiles(files));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(files));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  auto creds = grpc::experimental::TlsCredentials(options);
  if (creds == nullptr) return absl::InternalError("cannot build TLS channel credentials");
  return creds;
}

absl::StatusOr<SpiffeIdentity> PeerIdentity(const grpc::AuthContext& auth) {
  if (!auth.IsPeerAuthenticated()) {
    return absl::UnauthenticatedError("peer presented no verified certificate");
  }
  for (const auto& value : auth.FindPropertyValues("x509_subject_alternative_name")) {
    std::string_view san(value.data(), value.size());
    if (san.starts_with(kSpiffePrefix)) return ParseSpiffeId(san);
  }
  return absl::UnauthenticatedError("peer certificate has no codeco SPIFFE ID");
}

}  // namespace codeco
