#include "codeco/common/quantity.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"

namespace codeco {
namespace {

using int128 = __int128;

// value = mantissa * 10^exp10 * 2^exp2, exactly.
struct Exact {
  int128 mantissa = 0;
  int exp10 = 0;
  int exp2 = 0;
};

constexpr int kMaxDigits = 30;  // fits int128 with room for scaling

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(text), "\" is not a valid quantity: ", std::string(why)));
}

// A quantity past int64 once in the contract's unit (millicores, bytes, ns, bit/s).
absl::Status TooLarge(std::string_view text) {
  return Bad(text, absl::StrCat("too large: out of range (more than ",
                                std::numeric_limits<int64_t>::max(), " in its unit)"));
}

// Parses the leading number of `text` ("12", "0.5", "1e3", "10e-3", ".5").
// Sets *rest to what follows it.
absl::StatusOr<Exact> ParseNumber(std::string_view text, std::string_view* rest) {
  Exact out;
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    if (text[i] == '-') return Bad(text, "must not be negative");
    ++i;
  }
  int digits = 0;
  bool any_digit = false;
  bool in_fraction = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (in_fraction) return Bad(text, "two decimal points");
      in_fraction = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any_digit = true;
    if (digits == 0 && c == '0') {
      if (in_fraction) --out.exp10;
      continue;  // leading zeros carry no precision
    }
    if (++digits > kMaxDigits) return Bad(text, "too many digits: out of range");
    out.mantissa = out.mantissa * 10 + (c - '0');
    if (in_fraction) --out.exp10;
  }
  if (!any_digit) return Bad(text, "expected a number");
  // An exponent: 'e' or 'E' followed by an optionally signed integer. "E" alone
  // is the exa suffix, so only take it when digits follow.
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    bool negative = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) negative = text[j++] == '-';
    size_t start = j;
    int exponent = 0;
    for (; j < text.size() && text[j] >= '0' && text[j] <= '9'; ++j) {
      exponent = exponent * 10 + (text[j] - '0');
      if (exponent > 1000) return Bad(text, "exponent out of range");
    }
    if (j > start) {
      out.exp10 += negative ? -exponent : exponent;
      i = j;
    }
  }
  *rest = text.substr(i);
  return out;
}

// Applies a Kubernetes suffix to `value`; false when `suffix` is not one.
bool ApplyQuantitySuffix(std::string_view suffix, Exact* value) {
  static constexpr struct {
    std::string_view suffix;
    int exp10, exp2;
  } kSuffixes[] = {{"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},
                   {"M", 6, 0},   {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
                   {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
                   {"Ei", 0, 60}};
  for (const auto& s : kSuffixes) {
    if (s.suffix == suffix) {
      value->exp10 += s.exp10;
      value->exp2 += s.exp2;
      return true;
    }
  }
  return false;
}

// value * 10^scale10, rounded up to an integer; error beyond int64.
absl::StatusOr<int64_t> ToInteger(std::string_view text, Exact value, int scale10) {
  constexpr int128 kMax = std::numeric_limits<int64_t>::max();
  int128 v = value.mantissa;
  if (v == 0) return 0;
  for (int i = 0; i < value.exp2; ++i) {
    v *= 2;
    if (v > kMax) return TooLarge(text);
  }
  int e = value.exp10 + scale10;
  if (e >= 0) {
    for (int i = 0; i < e; ++i) {
      v *= 10;
      if (v > kMax) return TooLarge(text);
    }
    if (v > kMax) return TooLarge(text);
    return static_cast<int64_t>(v);
  }
  // Divide by 10^-e, rounding up. Past 38 digits the quotient is below 1.
  if (-e > 38) return 1;
  int128 divisor = 1;
  for (int i = 0; i < -e; ++i) divisor *= 10;
  int128 q = v / divisor + (v % divisor != 0 ? 1 : 0);
  if (q > kMax) return TooLarge(text);
  return static_cast<int64_t>(q);
}

absl::StatusOr<int64_t> ParseKubernetesQuantity(std::string_view text, int scale10) {
  std::string_view rest;
  auto number = ParseNumber(text, &rest);
  if (!number.ok()) return number.status();
  Exact value = *number;
  if (!ApplyQuantitySuffix(rest, &value)) {
    return Bad(text, absl::StrCat("unknown suffix \"", std::string(rest),
                                  "\" (use n u m k M G T P E Ki Mi Gi Ti Pi Ei)"));
  }
  return ToInteger(text, value, scale10);
}

// Trims ASCII spaces; quantities never contain inner spaces.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Formats value/divisor with up to three decimals, dropping trailing zeros.
std::string Decimal(int64_t value, int64_t divisor) {
  if (value % divisor == 0) return absl::StrCat(value / divisor);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(value) / static_cast<double>(divisor));
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

absl::StatusOr<int64_t> ParseCpuMillicores(std::string_view text) {
  return ParseKubernetesQuantity(Trim(text), 3);
}

absl::StatusOr<int64_t> ParseBytes(std::string_view text) {
  return ParseKubernetesQuantity(Trim(text), 0);
}

absl::StatusOr<int64_t> ParseDurationNanos(std::string_view text) {
  text = Trim(text);
  std::string_view rest;
  auto number = ParseNumber(text, &rest);
  if (!number.ok()) return number.status();
  static constexpr struct {
    std::string_view unit;
    int exp10;
  } kUnits[] = {{"ns", 0}, {"us", 3}, {"µs", 3}, {"ms", 6}, {"s", 9}, {"", 9}};
  for (const auto& u : kUnits) {
    if (u.unit == rest) return ToInteger(text, *number, u.exp10);
  }
  // Minutes and hours are not powers of ten: scale the exact value first.
  if (rest == "m" || rest == "h") {
    Exact value = *number;
    value.mantissa *= rest == "m" ? 60 : 3600;
    return ToInteger(text, value, 9);
  }
  return Bad(text, absl::StrCat("unknown duration unit \"", std::string(rest),
                                "\" (use ns us ms s m h)"));
}

absl::StatusOr<int64_t> ParseBandwidthBps(std::string_view text) {
  text = Trim(text);
  std::string_view rest;
  auto number = ParseNumber(text, &rest);
  if (!number.ok()) return number.status();
  static constexpr struct {
    std::string_view unit;
    int exp10;
  } kUnits[] = {{"bps", 0},  {"bit/s", 0},  {"kbps", 3},  {"Kbps", 3},  {"kbit/s", 3},
                {"Mbps", 6}, {"Mbit/s", 6}, {"Gbps", 9},  {"Gbit/s", 9}, {"Tbps", 12},
                {"Tbit/s", 12}};
  for (const auto& u : kUnits) {
    if (u.unit == rest) return ToInteger(text, *number, u.exp10);
  }
  Exact value = *number;
  if (ApplyQuantitySuffix(rest, &value)) return ToInteger(text, value, 0);
  return Bad(text, absl::StrCat("unknown bandwidth unit \"", std::string(rest),
                                "\" (use bps kbps Mbps Gbps Tbps)"));
}

absl::StatusOr<double> ParseRatio(std::string_view text) {
  text = Trim(text);
  bool percent = !text.empty() && text.back() == '%';
  if (percent) text.remove_suffix(1);
  std::string_view rest;
  auto number = ParseNumber(text, &rest);
  if (!number.ok()) return number.status();
  if (!rest.empty()) return Bad(text, "expected a ratio such as 0.05 or 5%");
  double value = static_cast<double>(number->mantissa) * std::pow(10.0, number->exp10);
  if (percent) value /= 100;
  if (value > 1) return Bad(text, "a ratio must be between 0 and 1 (0% to 100%)");
  return value;
}

std::string FormatCpu(int64_t millicores) {
  if (millicores % 1000 == 0) return absl::StrCat(millicores / 1000);
  return absl::StrCat(millicores, "m");
}

std::string FormatBytes(int64_t bytes) {
  static constexpr struct {
    const char* suffix;
    int64_t size;
  } kUnits[] = {{"Ti", int64_t{1} << 40}, {"Gi", int64_t{1} << 30}, {"Mi", int64_t{1} << 20},
                {"Ki", int64_t{1} << 10}};
  for (const auto& u : kUnits) {
    if (bytes >= u.size) return Decimal(bytes, u.size) + u.suffix;
  }
  return absl::StrCat(bytes);
}

std::string FormatDurationNanos(int64_t nanos) {
  if (nanos >= 1'000'000'000) return Decimal(nanos, 1'000'000'000) + "s";
  if (nanos >= 1'000'000) return Decimal(nanos, 1'000'000) + "ms";
  if (nanos >= 1'000) return Decimal(nanos, 1'000) + "us";
  return absl::StrCat(nanos, "ns");
}

std::string FormatBandwidth(int64_t bps) {
  if (bps >= 1'000'000'000) return Decimal(bps, 1'000'000'000) + "Gbps";
  if (bps >= 1'000'000) return Decimal(bps, 1'000'000) + "Mbps";
  if (bps >= 1'000) return Decimal(bps, 1'000) + "kbps";
  return absl::StrCat(bps, "bps");
}

}  // namespace codeco
