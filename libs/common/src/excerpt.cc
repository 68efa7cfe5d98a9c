#include "codeco/common/excerpt.h"

namespace codeco {

std::string PrintableExcerpt(absl::string_view text, size_t most) {
  std::string out;
  for (char c : text.substr(0, most)) out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  if (text.size() > most) out += "...";
  return out;
}

}  // namespace codeco
