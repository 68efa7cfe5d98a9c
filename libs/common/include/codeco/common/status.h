#pragma once
// Status helpers shared by every core: the early-return macros the installed
// Abseil (20220623) lacks, and field-path errors for untrusted input.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CODECO_STATUS_CONCAT_INNER(a, b) a##b
#define CODECO_STATUS_CONCAT(a, b) CODECO_STATUS_CONCAT_INNER(a, b)

/// Returns from the enclosing function with `expr`'s status when it is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status codeco_status_internal = (expr);        \
    if (!codeco_status_internal.ok()) return codeco_status_internal; \
  } while (false)

/// Evaluates `expr` (an absl::StatusOr<T>); on error returns its status, else
/// moves the value into `lhs` (which may be a declaration such as `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  CODECO_ASSIGN_OR_RETURN_IMPL(CODECO_STATUS_CONCAT(codeco_statusor_, __LINE__), lhs, expr)
#define CODECO_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

namespace codeco {

/// An INVALID_ARGUMENT status whose message starts with the offending field
/// path, e.g. `spec.services[2].name: must be a DNS label`.
absl::Status InvalidFieldError(const std::string& field_path, const std::string& message);

/// Collects every field error found while validating one input, so a user
/// sees all of them at once instead of fixing one per round trip.
class FieldErrors {
 public:
  /// Records that `field_path` is wrong because of `message`.
  void Add(const std::string& field_path, const std::string& message);
  /// True when nothing was recorded.
  bool empty() const { return errors_.empty(); }
  /// The recorded errors as "path: message" lines, in the order added.
  const std::vector<std::string>& errors() const { return errors_; }
  /// OK when empty, else one INVALID_ARGUMENT whose message lists every error
  /// on its own line (the first error first).
  absl::Status ToStatus() const;

 private:
  std::vector<std::string> errors_;
};

}  // namespace codeco
