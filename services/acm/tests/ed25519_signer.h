#pragma once
// Signs policy bundles in tests as an operator would with
// `openssl pkeyutl -sign -rawin`: a fresh Ed25519 key, its PEM public key,
// and base64 signatures.

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"

namespace codeco::acm::testing {

/// A fresh Ed25519 key pair.
class Ed25519Signer {
 public:
  Ed25519Signer() {
    std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
        EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), &EVP_PKEY_CTX_free);
    EVP_PKEY* k = nullptr;
    REQUIRE(EVP_PKEY_keygen_init(ctx.get()) == 1);
    REQUIRE(EVP_PKEY_keygen(ctx.get(), &k) == 1);
    key_.reset(k);
  }

  /// The public key as PEM (SubjectPublicKeyInfo).
  std::string PublicPem() const {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
    REQUIRE(PEM_write_bio_PUBKEY(bio.get(), key_.get()) == 1);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(n));
  }

  /// The base64 signature of `data`.
  std::string Sign(const std::string& data) const {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    REQUIRE(EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1);
    size_t len = 0;
    const auto* in = reinterpret_cast<const unsigned char*>(data.data());
    REQUIRE(EVP_DigestSign(ctx.get(), nullptr, &len, in, data.size()) == 1);
    std::string sig(len, '\0');
    REQUIRE(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in,
                           data.size()) == 1);
    return absl::Base64Escape(sig);
  }

 private:
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key_{nullptr, &EVP_PKEY_free};
};

}  // namespace codeco::acm::testing
