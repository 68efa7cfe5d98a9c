#include "acm/core/bundle_signature.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "codeco/common/status.h"

namespace codeco::acm {

absl::Status VerifyBundleSignature(absl::string_view data, absl::string_view signature_base64,
                                   absl::string_view public_key_pem) {
  std::string signature;
  if (!absl::Base64Unescape(absl::StripAsciiWhitespace(signature_base64), &signature) ||
      signature.empty()) {
    return InvalidFieldError("signature", "is not base64");
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(public_key_pem.data(), static_cast<int>(public_key_pem.size())), &BIO_free);
  if (!bio) return absl::ResourceExhaustedError("public_key: out of memory");
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) return InvalidFieldError("public_key", "is not a PEM public key");
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    return InvalidFieldError("public_key", "is not an Ed25519 key");
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return absl::InternalError("public_key: cannot start a verification");
  }
  const int ok = EVP_DigestVerify(
      ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
      reinterpret_cast<const unsigned char*>(data.data()), data.size());
  if (ok != 1) return InvalidFieldError("signature", "does not verify with the configured key");
  return absl::OkStatus();
}

}  // namespace codeco::acm
