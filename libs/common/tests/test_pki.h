#pragma once
// Certificates for TLS tests, made with the openssl CLI in a scratch
// directory: CAs and the leaves they sign, as PEM files <name>.crt and
// <name>.key (EC P-256, valid two days).
//
//   TestPki pki(dir);
//   pki.Ca("ca");
//   pki.Leaf("server", "/CN=server", "subjectAltName=IP:127.0.0.1\n", "ca");
//   ... pki.Path("server.crt"), pki.Pem("ca.crt") ...

#include <filesystem>
#include <string>

namespace codeco::testing {

/// A directory of test certificates. Fails the current Catch2 test when
/// openssl does.
class TestPki {
 public:
  /// Makes certificates in `dir` (which must exist).
  explicit TestPki(std::filesystem::path dir);
  /// A self-signed CA, subject "/CN=<name>".
  void Ca(const std::string& name);
  /// A certificate for `subject` ("/O=x/CN=y") signed by the CA `signer`,
  /// with the openssl extension lines `extensions` ("subjectAltName=...\n").
  void Leaf(const std::string& name, const std::string& subject, const std::string& extensions,
            const std::string& signer);
  /// The path of a file of the directory ("ca.crt").
  std::string Path(const std::string& file) const;
  /// The text of a file of the directory.
  std::string Pem(const std::string& file) const;

 private:
  void Run(const std::string& command);

  std::filesystem::path dir_;
  int serial_ = 1;
};

}  // namespace codeco::testing
