#include <catch2/catch.hpp>

#include "codeco/common/status.h"

namespace codeco {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST_CASE("status macros return early on error and pass values on") {
  REQUIRE(Quarter(8).value() == 2);
  REQUIRE(Quarter(6).status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(CheckEven(4).ok());
  REQUIRE(CheckEven(3).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("field errors name every path in order") {
  FieldErrors errors;
  REQUIRE(errors.ToStatus().ok());
  errors.Add("spec.services[0].name", "required");
  errors.Add("spec.services[1].replicas", "must be at least 0");
  absl::Status status = errors.ToStatus();
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(status.message() ==
          "spec.services[0].name: required\nspec.services[1].replicas: must be at least 0");
  REQUIRE(InvalidFieldError("a.b", "bad").message() == "a.b: bad");
}

}  // namespace
}  // namespace codeco
