#pragma once
// Quoting untrusted text (a peer's answer, a file) in an error message.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace codeco {

/// The first `most` bytes of `text`, with every byte outside printable
/// ASCII shown as a space, and "..." when cut.
std::string PrintableExcerpt(absl::string_view text, size_t most = 200);

}  // namespace codeco
