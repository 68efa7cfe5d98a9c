#include "test_pki.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace codeco::testing {
namespace {

constexpr char kNewKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestPki::TestPki(std::filesystem::path dir) : dir_(std::move(dir)) {}

void TestPki::Run(const std::string& command) {
  const std::string log = Path("openssl.log");
  const int rc = std::system((command + " >>" + log + " 2>&1").c_str());
  INFO(command << "\n" << Pem("openssl.log"));
  REQUIRE(rc == 0);
}

void TestPki::Ca(const std::string& name) {
  Run(absl::StrCat("openssl req -x509 ", kNewKey, " -days 2 -subj /CN=", name, " -keyout ",
                   Path(name + ".key"), " -out ", Path(name + ".crt")));
}

void TestPki::Leaf(const std::string& name, const std::string& subject,
                   const std::string& extensions, const std::string& signer) {
  std::ofstream(dir_ / (name + ".ext")) << extensions;
  Run(absl::StrCat("openssl req ", kNewKey, " -subj ", subject, " -keyout ", Path(name + ".key"),
                   " -out ", Path(name + ".csr")));
  Run(absl::StrCat("openssl x509 -req -days 2 -set_serial ", ++serial_, " -in ",
                   Path(name + ".csr"), " -CA ", Path(signer + ".crt"), " -CAkey ",
                   Path(signer + ".key"), " -extfile ", Path(name + ".ext"), " -out ",
                   Path(name + ".crt")));
}

std::string TestPki::Path(const std::string& file) const { return (dir_ / file).string(); }

std::string TestPki::Pem(const std::string& file) const {
  std::ifstream in(dir_ / file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace codeco::testing
