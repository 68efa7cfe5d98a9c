#pragma once
// Policy bundles are signed (docs/policies.md): ACM uses a bundle only after
// checking an Ed25519 signature of its exact bytes against the public key it
// was configured with. Sign a bundle with OpenSSL:
//   openssl pkeyutl -sign -inkey key.pem -rawin -in bundle.yaml | base64 -w0 > bundle.yaml.sig

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace codeco::acm {

/// OK when `signature_base64` (base64, surrounding whitespace ignored) is an
/// Ed25519 signature of `data` by the public key in `public_key_pem` (a PEM
/// SubjectPublicKeyInfo, as `openssl pkey -pubout` writes). INVALID_ARGUMENT
/// naming `signature` when it is not base64 or does not verify; naming
/// `public_key` when the key does not parse or is not Ed25519.
absl::Status VerifyBundleSignature(absl::string_view data, absl::string_view signature_base64,
                                   absl::string_view public_key_pem);

}  // namespace codeco::acm
