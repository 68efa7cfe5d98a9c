#include <catch2/catch.hpp>
#include <limits>
#include <utility>

#include "codeco/common/quantity.h"

namespace codeco {
namespace {

TEST_CASE("CPU quantities parse exactly into millicores") {
  REQUIRE(ParseCpuMillicores("500m").value() == 500);
  REQUIRE(ParseCpuMillicores("2").value() == 2000);
  REQUIRE(ParseCpuMillicores("0.25").value() == 250);
  REQUIRE(ParseCpuMillicores(".5").value() == 500);
  REQUIRE(ParseCpuMillicores("10e-3").value() == 10);
  REQUIRE(ParseCpuMillicores("1e3m").value() == 1000);
  REQUIRE(ParseCpuMillicores("0.0001").value() == 1);  // rounds up, as Kubernetes does
  REQUIRE(ParseCpuMillicores("100u").value() == 1);
  REQUIRE(ParseCpuMillicores("0").value() == 0);
  REQUIRE(ParseCpuMillicores("1k").value() == 1'000'000);
}

TEST_CASE("memory quantities parse exactly into bytes") {
  REQUIRE(ParseBytes("512Mi").value() == 536870912);
  REQUIRE(ParseBytes("1.5Gi").value() == 1610612736);
  REQUIRE(ParseBytes("1G").value() == 1'000'000'000);
  REQUIRE(ParseBytes("1e9").value() == 1'000'000'000);
  REQUIRE(ParseBytes("128974848").value() == 128974848);
  REQUIRE(ParseBytes("129e6").value() == 129'000'000);
  REQUIRE(ParseBytes("123Mi").value() == 128974848);
  REQUIRE(ParseBytes("4Ei").value() == int64_t{4} << 60);
}

TEST_CASE("durations parse into nanoseconds") {
  REQUIRE(ParseDurationNanos("20ms").value() == 20'000'000);
  REQUIRE(ParseDurationNanos("1.5s").value() == 1'500'000'000);
  REQUIRE(ParseDurationNanos("250us").value() == 250'000);
  REQUIRE(ParseDurationNanos("100ns").value() == 100);
  REQUIRE(ParseDurationNanos("2m").value() == 120'000'000'000);
  REQUIRE(ParseDurationNanos("1h").value() == 3'600'000'000'000);
  REQUIRE(ParseDurationNanos("10e-3").value() == 10'000'000);  // bare = seconds
  REQUIRE(ParseDurationNanos("0.5").value() == 500'000'000);
}

TEST_CASE("bandwidths parse into bits per second") {
  REQUIRE(ParseBandwidthBps("100Mbps").value() == 100'000'000);
  REQUIRE(ParseBandwidthBps("1.5Gbps").value() == 1'500'000'000);
  REQUIRE(ParseBandwidthBps("64kbps").value() == 64'000);
  REQUIRE(ParseBandwidthBps("10Mbit/s").value() == 10'000'000);
  REQUIRE(ParseBandwidthBps("100M").value() == 100'000'000);
  REQUIRE(ParseBandwidthBps("5000").value() == 5000);
}

TEST_CASE("ratios accept fractions and percentages") {
  REQUIRE(ParseRatio("5%").value() == Approx(0.05));
  REQUIRE(ParseRatio("0.05").value() == Approx(0.05));
  REQUIRE(ParseRatio("100%").value() == Approx(1.0));
  REQUIRE_FALSE(ParseRatio("150%").ok());
  REQUIRE_FALSE(ParseRatio("5x").ok());
}

TEST_CASE("bad quantities are errors that quote the input") {
  for (const char* bad : {"", "m", "-1", "1.2.3", "12 cores", "1Qi", "1e", "abc", "1..0",
                          "99999999999999999999999999999999", "9Ei", "1e40"}) {
    INFO(bad);
    auto cpu = ParseCpuMillicores(bad);
    REQUIRE_FALSE(cpu.ok());
    REQUIRE(cpu.status().code() == absl::StatusCode::kInvalidArgument);
  }
  REQUIRE_THAT(std::string(ParseCpuMillicores("-1").status().message()),
               Catch::Contains("must not be negative"));
  REQUIRE_THAT(std::string(ParseBytes("1Qi").status().message()),
               Catch::Contains("unknown suffix \"Qi\""));
  REQUIRE_FALSE(ParseDurationNanos("20 parsecs").ok());
  REQUIRE_FALSE(ParseDurationNanos("5d").ok());
  REQUIRE_FALSE(ParseBandwidthBps("10MB/s").ok());
  REQUIRE_FALSE(ParseBytes("9223372036854775808").ok());  // int64 max + 1
  REQUIRE(ParseBytes("9223372036854775807").value() == std::numeric_limits<int64_t>::max());
  REQUIRE(ParseCpuMillicores("9223372036854775807m").value() ==
          std::numeric_limits<int64_t>::max());
  for (auto [text, parse] : {std::pair{"99999999999999999999", &ParseCpuMillicores},
                             std::pair{"1e30Ei", &ParseBytes}, std::pair{"8Ei", &ParseBytes},
                             std::pair{"1e30Tbps", &ParseBandwidthBps},
                             std::pair{"1e12h", &ParseDurationNanos}}) {
    INFO(text);
    absl::StatusOr<int64_t> v = parse(text);
    REQUIRE(v.status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE_THAT(std::string(v.status().message()), Catch::Contains("out of range"));
    REQUIRE_THAT(std::string(v.status().message()), Catch::Contains(text));
  }
}

TEST_CASE("quantities format for display") {
  REQUIRE(FormatCpu(500) == "500m");
  REQUIRE(FormatCpu(2000) == "2");
  REQUIRE(FormatBytes(536870912) == "512Mi");
  REQUIRE(FormatBytes(1610612736) == "1.5Gi");
  REQUIRE(FormatBytes(100) == "100");
  REQUIRE(FormatDurationNanos(20'000'000) == "20ms");
  REQUIRE(FormatDurationNanos(1'500'000'000) == "1.5s");
  REQUIRE(FormatBandwidth(100'000'000) == "100Mbps");
  REQUIRE(FormatBandwidth(1'500'000'000) == "1.5Gbps");
}

}  // namespace
}  // namespace codeco
