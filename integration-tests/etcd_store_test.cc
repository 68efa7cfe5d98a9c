// The etcd KvStore and leader election against a real etcd (Debian's
// etcd-server) on loopback: the KvStore contract, paging, fencing, etcd's
// limits, a killed member, and leadership handed over by resignation, by a
// lease that runs out, and lost when etcd is gone.

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "codeco/common/etcd_client.h"
#include "codeco/common/etcd_kv_store.h"
#include "codeco/common/leader_election.h"
#include "etcd_cluster.h"
#include "kv_store_contract.h"
#include "process.h"

namespace codeco {
namespace {

using testing::EtcdCluster;
using testing::ScratchDir;

absl::Time In(absl::Duration d) { return absl::Now() + d; }

std::shared_ptr<EtcdClient> ClientOf(const EtcdCluster& cluster) {
  auto client = EtcdClient::Connect({.endpoints = cluster.endpoints(),
                                     .attempt_timeout = absl::Seconds(2),
                                     .call_timeout = absl::Seconds(15)});
  REQUIRE(client.ok());
  return std::move(*client);
}

std::unique_ptr<KvStore> StoreOn(std::shared_ptr<EtcdClient> client, const std::string& prefix,
                                 EtcdFence fence = {}, int64_t scan_page = 512) {
  auto store = OpenEtcdKvStore(std::move(client), {.prefix = prefix,
                                                   .column_families = {"apps", "clusters"},
                                                   .fence = fence,
                                                   .scan_page = scan_page});
  REQUIRE(store.ok());
  return std::move(*store);
}

TEST_CASE("etcd store keeps the KvStore contract on three members") {
  ScratchDir dir("etcd-contract");
  EtcdCluster etcd(dir.path, 3);
  REQUIRE(etcd.WaitReady(In(absl::Seconds(30))).ok());
  std::shared_ptr<EtcdClient> client = ClientOf(etcd);
  std::unique_ptr<KvStore> store = StoreOn(client, "/codeco/test/contract/");
  testing::CheckStoreContract(*store);

  SECTION("scans page through etcd and stop where asked") {
    std::unique_ptr<KvStore> paged = StoreOn(client, "/codeco/test/paged/", {}, /*scan_page=*/2);
    for (int i = 0; i < 7; ++i) {
      REQUIRE(paged->Put("apps", absl::StrCat("k", i), absl::StrCat("v", i)).ok());
    }
    REQUIRE(paged->Put("apps", "other", "x").ok());
    auto all = testing::ScanAll(*paged, "apps", {.prefix = "k"});
    REQUIRE(all.size() == 7);
    REQUIRE(all.front().first == "k0");
    REQUIRE(all.back().second == "v6");
    auto after = testing::ScanAll(*paged, "apps", {.prefix = "k", .start_after = "k2", .limit = 3});
    REQUIRE(after.size() == 3);
    REQUIRE(after[0].first == "k3");
    REQUIRE(after[2].first == "k5");
    // Another prefix's store sees none of it.
    REQUIRE(testing::ScanAll(*store, "apps", {.prefix = "k"}).empty());
  }

  SECTION("bad options are refused naming what is wrong") {
    auto no_slash = OpenEtcdKvStore(client, {.prefix = "/codeco/x"});
    REQUIRE(no_slash.status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(no_slash.status().message().find("store.etcd.prefix") != std::string::npos);
    auto plaintext = EtcdClient::Connect({.endpoints = {"10.1.2.3:2379"}});
    REQUIRE(plaintext.status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(plaintext.status().message().find("loopback") != std::string::npos);
  }

  SECTION("a batch over etcd's transaction limit is refused whole and says so") {
    KvWriteBatch big;
    for (int i = 0; i < 5000; ++i) big.Put("apps", absl::StrCat("big/", i), "x");
    absl::Status status = store->Write(big);
    REQUIRE_FALSE(status.ok());
    REQUIRE(status.message().find("--max-txn-ops") != std::string::npos);
    REQUIRE(testing::ScanAll(*store, "apps", {.prefix = "big/"}).empty());
  }

  SECTION("reads and writes go on when a member is killed and after it rejoins") {
    etcd.Kill(0);  // The member the client talks to first.
    for (int i = 0; i < 20; ++i) REQUIRE(store->Put("apps", absl::StrCat("during/", i), "x").ok());
    REQUIRE(testing::ScanAll(*store, "apps", {.prefix = "during/"}).size() == 20);
    etcd.Restart(0);
    etcd.Kill(1);
    REQUIRE(store->Put("apps", "after", "y").ok());
    REQUIRE(store->Get("apps", "after").value() == "y");
  }
}

TEST_CASE("leadership moves by resignation and by an expired lease and fences the old leader") {
  ScratchDir dir("etcd-election");
  EtcdCluster etcd(dir.path, 1);
  REQUIRE(etcd.WaitReady(In(absl::Seconds(30))).ok());
  std::shared_ptr<EtcdClient> client = ClientOf(etcd);
  const std::string key = "/codeco/test/acm/leader";
  auto start = [&](const std::string& identity) {
    auto election = LeaderElection::Start(
        client, {.key = key, .identity = identity, .lease_ttl = absl::Seconds(2)}, nullptr);
    REQUIRE(election.ok());
    return std::move(*election);
  };

  std::unique_ptr<LeaderElection> a = start("a");
  std::unique_ptr<LeaderElection> b = start("b");
  REQUIRE(a->TryAcquire().value());
  REQUIRE(a->TryAcquire().value());  // Asking again keeps it.
  REQUIRE_FALSE(b->TryAcquire().value());
  REQUIRE(a->Holder().value() == "a");
  REQUIRE(b->create_revision() == 0);

  std::unique_ptr<KvStore> a_store =
      StoreOn(client, "/codeco/test/acm/", {.key = key, .create_revision = a->create_revision()});
  REQUIRE(a_store->Put("apps", "by-a", "1").ok());

  // The leader resigns: the standby takes over at once, and the old leader's
  // store can no longer write.
  REQUIRE(a->Resign().ok());
  REQUIRE(b->TryAcquire().value());
  REQUIRE(b->Holder().value() == "b");
  absl::Status fenced = a_store->Put("apps", "by-a-late", "2");
  REQUIRE(fenced.code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(fenced.message().find("no longer holds") != std::string::npos);
  REQUIRE(a_store->Get("apps", "by-a-late").status().code() == absl::StatusCode::kNotFound);

  // The new leader stops renewing without resigning (as when killed): its
  // lease runs out after the TTL and a third replica takes over.
  b.reset();
  std::unique_ptr<LeaderElection> c = start("c");
  const absl::Time deadline = In(absl::Seconds(30));
  bool c_leads = false;
  while (!c_leads && absl::Now() < deadline) {
    c_leads = c->TryAcquire().value();
    if (!c_leads) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE(c_leads);
  REQUIRE(c->Holder().value() == "c");
  std::unique_ptr<KvStore> c_store =
      StoreOn(client, "/codeco/test/acm/", {.key = key, .create_revision = c->create_revision()});
  REQUIRE(c_store->Get("apps", "by-a").value() == "1");
  REQUIRE(c_store->Put("apps", "by-c", "3").ok());
}

TEST_CASE("a leader that cannot reach etcd hears that its lease is lost") {
  ScratchDir dir("etcd-lost");
  EtcdCluster etcd(dir.path, 1);
  REQUIRE(etcd.WaitReady(In(absl::Seconds(30))).ok());
  auto client = EtcdClient::Connect({.endpoints = etcd.endpoints(),
                                     .attempt_timeout = absl::Milliseconds(300),
                                     .call_timeout = absl::Milliseconds(600)});
  REQUIRE(client.ok());
  absl::Notification lost;
  std::string why;
  auto election = LeaderElection::Start(
      std::move(*client),
      {.key = "/codeco/test/lost", .identity = "x", .lease_ttl = absl::Seconds(2)},
      [&](const absl::Status& status) {
        why = std::string(status.message());
        lost.Notify();
      });
  REQUIRE(election.ok());
  REQUIRE((*election)->TryAcquire().value());
  etcd.Kill(0);
  REQUIRE(lost.WaitForNotificationWithTimeout(absl::Seconds(60)));
  REQUIRE(why.find("not renewed") != std::string::npos);
}

// Runs `command` (a dev-ca.sh call); fails the test when it fails.
void RunCa(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

TEST_CASE("the etcd store works over mutual TLS and etcd refuses a client outside its CA") {
  ScratchDir dir("etcd-tls");
  const std::string ca = (dir.path / "ca").string();
  const std::string other = (dir.path / "other-ca").string();
  const std::string script = CODECO_DEV_CA_SCRIPT;
  RunCa(script + " " + ca + " ca");
  RunCa(script + " " + ca + " issue hub etcd");  // the members' certificate
  RunCa(script + " " + ca + " issue hub acm");   // a codeco service, the client
  RunCa(script + " " + other + " ca");
  RunCa(script + " " + other + " issue hub acm");
  const TlsFiles member{.ca_file = ca + "/ca.crt",
                        .cert_file = ca + "/hub/etcd.crt",
                        .key_file = ca + "/hub/etcd.key"};
  EtcdCluster etcd(dir.path, 3, member);
  absl::Status ready = etcd.WaitReady(In(absl::Seconds(30)));
  INFO(ready.message());
  REQUIRE(ready.ok());

  auto client = EtcdClient::Connect({.endpoints = etcd.endpoints(),
                                     .tls = {.ca_file = ca + "/ca.crt",
                                             .cert_file = ca + "/hub/acm.crt",
                                             .key_file = ca + "/hub/acm.key"},
                                     .attempt_timeout = absl::Seconds(2),
                                     .call_timeout = absl::Seconds(15)});
  REQUIRE(client.ok());
  std::unique_ptr<KvStore> store = StoreOn(std::move(*client), "/codeco/test/tls/");
  testing::CheckStoreContract(*store);

  // A certificate of another CA, and no TLS at all: etcd answers neither.
  auto stranger = EtcdClient::Connect({.endpoints = etcd.endpoints(),
                                       .tls = {.ca_file = ca + "/ca.crt",
                                               .cert_file = other + "/hub/acm.crt",
                                               .key_file = other + "/hub/acm.key"},
                                       .attempt_timeout = absl::Seconds(1),
                                       .call_timeout = absl::Seconds(3)});
  REQUIRE(stranger.ok());
  etcdserverpb::RangeRequest read;
  read.set_key("/codeco/test/tls/");
  CHECK_FALSE((*stranger)->Range(read).ok());
  auto plaintext = EtcdClient::Connect({.endpoints = etcd.endpoints(),
                                        .attempt_timeout = absl::Seconds(1),
                                        .call_timeout = absl::Seconds(3)});
  REQUIRE(plaintext.ok());
  CHECK_FALSE((*plaintext)->Range(read).ok());
}

}  // namespace
}  // namespace codeco
