#include <catch2/catch.hpp>

#include "codeco/common/config.h"
#include "codeco/common/service_config.h"

namespace codeco {
namespace {

// The message of a failed load, for matching.
std::string LoadError(const std::string& yaml, std::map<std::string, std::string> overrides = {}) {
  auto config = CommonServiceSchema().Load(yaml, overrides);
  REQUIRE_FALSE(config.ok());
  REQUIRE(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST_CASE("a valid file loads with defaults for the rest") {
  auto config = CommonServiceSchema().Load(
      "role: hub\ndata_dir: /tmp/x\ninsecure: true\ntls:\n  refresh_interval: 5s\n", {});
  REQUIRE(config.ok());
  REQUIRE(config->GetString("role") == "hub");
  REQUIRE(config->GetBool("insecure"));
  REQUIRE(config->GetDuration("tls.refresh_interval") == absl::Seconds(5));
  REQUIRE(config->GetDuration("rpc.default_deadline") == absl::Seconds(30));
  REQUIRE(config->GetString("listen") == "127.0.0.1:0");
}

TEST_CASE("config rejects bad keys and values with their paths") {
  SECTION("unknown top-level key") {
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\nlisten_addr: x\n"),
                 Catch::Contains("listen_addr: unknown key"));
  }
  SECTION("unknown nested key") {
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\ntls:\n  ca: x\n"),
                 Catch::Contains("tls.ca: unknown key"));
  }
  SECTION("wrong type") {
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\ninsecure: maybe\n"),
                 Catch::Contains("insecure: not a bool"));
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\nrpc:\n  default_deadline: soon\n"),
                 Catch::Contains("rpc.default_deadline: not a duration"));
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\ntls: [a, b]\n"),
                 Catch::Contains("tls: unknown key"));
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\ntls: x\n"),
                 Catch::Contains("tls: expected a mapping"));
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\nlisten:\n  a: b\n"),
                 Catch::Contains("listen: expected a host:port, got a mapping"));
  }
  SECTION("bad enum and address") {
    REQUIRE_THAT(LoadError("role: leader\ndata_dir: d\n"),
                 Catch::Contains("role: must be one of hub|mc"));
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\nlisten: 127.0.0.1:99999\n"),
                 Catch::Contains("listen: bad port"));
  }
  SECTION("missing required keys, all reported") {
    std::string error = LoadError("");
    REQUIRE_THAT(error, Catch::Contains("role: required"));
    REQUIRE_THAT(error, Catch::Contains("data_dir: required"));
  }
  SECTION("unknown override from a flag") {
    REQUIRE_THAT(LoadError("role: hub\ndata_dir: d\n", {{"nope", "1"}}),
                 Catch::Contains("nope: unknown key"));
  }
  SECTION("broken YAML") {
    REQUIRE_THAT(LoadError("role: [hub\n"), Catch::Contains("invalid YAML"));
  }
  SECTION("not a mapping") { REQUIRE_THAT(LoadError("- a\n- b\n"), Catch::Contains("<root>")); }
}

TEST_CASE("flags override the file and map dashes to keys") {
  const char* argv[] = {"codeco-acm", "--role",   "mc",      "--data-dir=/tmp/d", "--insecure",
                        "--set",      "log.level=debug", "--tls.refresh-interval", "2s"};
  ConfigSchema schema = CommonServiceSchema();
  auto flags = ParseFlags(9, argv, schema);
  REQUIRE(flags.ok());
  REQUIRE(flags->overrides.at("role") == "mc");
  REQUIRE(flags->overrides.at("data_dir") == "/tmp/d");
  REQUIRE(flags->overrides.at("insecure") == "true");
  REQUIRE(flags->overrides.at("log.level") == "debug");
  auto config = schema.Load("role: hub\nlog:\n  level: warn\n", flags->overrides);
  REQUIRE(config.ok());
  REQUIRE(config->GetString("role") == "mc");
  REQUIRE(config->GetString("log.level") == "debug");
  REQUIRE(config->GetDuration("tls.refresh_interval") == absl::Seconds(2));
}

TEST_CASE("federation keys reach the service config") {
  ConfigSchema schema = CommonServiceSchema();
  const char* argv[] = {"codeco-swm", "--role", "mc", "--insecure", "--data-dir", "d",
                        "--federation.hub-acm", "127.0.1.1:7001", "--federation.lms",
                        "127.0.3.1:7100", "--network.egress-proxy", "127.0.3.1:7200"};
  auto flags = ParseFlags(12, argv, schema);
  REQUIRE(flags.ok());
  auto config = schema.Load("", flags->overrides);
  REQUIRE(config.ok());
  auto service = ReadServiceConfig("swm", *config);
  REQUIRE(service.ok());
  REQUIRE(service->hub_acm == "127.0.1.1:7001");
  REQUIRE(service->lms == "127.0.3.1:7100");
  REQUIRE(service->egress_proxy == "127.0.3.1:7200");
  REQUIRE_THAT(LoadError("role: mc\ndata_dir: d\nfederation:\n  hub_acm: nowhere\n"),
               Catch::Contains("federation.hub_acm: not a host:port address"));
}

TEST_CASE("bad flags are rejected by name") {
  ConfigSchema schema = CommonServiceSchema();
  const char* unknown[] = {"x", "--colour", "red"};
  REQUIRE_THAT(std::string(ParseFlags(3, unknown, schema).status().message()),
               Catch::Contains("--colour: unknown flag"));
  const char* missing[] = {"x", "--listen"};
  REQUIRE_THAT(std::string(ParseFlags(2, missing, schema).status().message()),
               Catch::Contains("--listen: needs a value"));
  const char* positional[] = {"x", "stray"};
  REQUIRE_FALSE(ParseFlags(2, positional, schema).ok());
}

TEST_CASE("service config checks the rules between keys") {
  ConfigSchema schema = CommonServiceSchema();
  SECTION("plaintext only on loopback") {
    auto config = schema.Load("role: hub\ndata_dir: d\ninsecure: true\nlisten: 0.0.0.0:7000\n", {});
    REQUIRE(config.ok());
    auto service = ReadServiceConfig("acm", *config);
    REQUIRE_THAT(std::string(service.status().message()),
                 Catch::Contains("insecure: plaintext is allowed only on loopback"));
  }
  SECTION("TLS files required unless insecure") {
    auto config = schema.Load("role: mc\ndata_dir: d\n", {});
    REQUIRE(config.ok());
    std::string error(ReadServiceConfig("acm", *config).status().message());
    REQUIRE_THAT(error, Catch::Contains("tls.ca_file: required unless insecure"));
    REQUIRE_THAT(error, Catch::Contains("tls.key_file: required unless insecure"));
  }
  SECTION("a loopback development setup is accepted") {
    auto config = schema.Load("role: mc\ndata_dir: d\ninsecure: true\nlisten: '[::1]:0'\n", {});
    REQUIRE(config.ok());
    auto service = ReadServiceConfig("acm", *config);
    REQUIRE(service.ok());
    REQUIRE(service->role == Role::kManagedCluster);
  }
  SECTION("store budgets are byte quantities within bounds") {
    auto config = schema.Load(
        "role: hub\ndata_dir: d\ninsecure: true\nstore:\n  block_cache: 8Mi\n"
        "  memtable_budget: 4Mi\n",
        {});
    REQUIRE(config.ok());
    auto service = ReadServiceConfig("acm", *config);
    REQUIRE(service.ok());
    REQUIRE(service->store_block_cache_bytes == (8u << 20));
    REQUIRE(service->store_memtable_budget_bytes == (4u << 20));
    auto bad = schema.Load(
        "role: hub\ndata_dir: d\ninsecure: true\nstore:\n  block_cache: lots\n"
        "  memtable_budget: 100Ki\n",
        {});
    REQUIRE(bad.ok());
    std::string error(ReadServiceConfig("acm", *bad).status().message());
    REQUIRE_THAT(error, Catch::Contains("store.block_cache: "));
    REQUIRE_THAT(error, Catch::Contains("store.memtable_budget: must be between 1Mi and 64Gi"));
  }
  REQUIRE(IsLoopbackAddress("127.0.3.1:80"));
  REQUIRE(IsLoopbackAddress("localhost:1"));
  REQUIRE_FALSE(IsLoopbackAddress("10.0.0.1:80"));
}

}  // namespace
}  // namespace codeco
