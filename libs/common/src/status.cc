#include "codeco/common/status.h"

#include "absl/strings/str_join.h"

namespace codeco {

absl::Status InvalidFieldError(const std::string& field_path, const std::string& message) {
  return absl::InvalidArgumentError(field_path + ": " + message);
}

void FieldErrors::Add(const std::string& field_path, const std::string& message) {
  errors_.push_back(field_path + ": " + message);
}

absl::Status FieldErrors::ToStatus() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

}  // namespace codeco
