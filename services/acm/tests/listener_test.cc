// ApplicationManager's listeners (what WatchApplication hangs on): a listener
// removed while a Notify is under way is never called after RemoveListener
// returns, even when that Notify had already copied the listener list.
#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "acm/core/application_manager.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {
namespace {

std::string SmallCam(const std::string& tag) {
  return R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata:
  name: web
spec:
  appName: web
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers:
          - name: web
            image: registry.example.org/web:)" +
         tag + "\n";
}

struct Fixture {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 1000}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  ApplicationManager manager{store, scheduler, clock};

  void Apply(const std::string& tag) {
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam(tag));
    absl::StatusOr<v1::ApplyApplicationResponse> response = manager.Apply(request);
    INFO(response.status().ToString());
    REQUIRE(response.ok());
  }
};

TEST_CASE("listeners: one removed after Notify copied the list is not called") {
  Fixture f;
  int removed_calls = 0;
  int kept_calls = 0;
  bool removed = false;
  // Used after RemoveListener only through the flag: a freed watcher would
  // be touched exactly where removed_calls counts.
  int doomed = f.manager.AddListener([&] {
    if (removed) ++removed_calls;
  });
  f.manager.AddListener([&] { ++kept_calls; });
  // The hook runs in the window between the copy and the calls: the removal
  // lands exactly there, deterministically, on this thread.
  f.manager.SetNotifyHookForTest([&] {
    if (!removed) {
      f.manager.RemoveListener(doomed);
      removed = true;
    }
  });
  f.Apply("1");
  REQUIRE(removed);
  REQUIRE(removed_calls == 0);
  REQUIRE(kept_calls == 1);
  f.Apply("2");
  REQUIRE(removed_calls == 0);
  REQUIRE(kept_calls == 2);
  // Removing twice (or an unknown id) is harmless.
  f.manager.RemoveListener(doomed);
  f.manager.RemoveListener(12345);
}

TEST_CASE("listeners: RemoveListener waits for the listener's running call") {
  Fixture f;
  absl::Notification entered, release;
  std::atomic<bool> finished{false};
  std::atomic<int> calls{0};
  int id = f.manager.AddListener([&] {
    if (calls.fetch_add(1) > 0) return;
    entered.Notify();
    release.WaitForNotification();
    finished.store(true);
  });
  // No Catch assertion off the test's thread: the writer only records.
  std::atomic<bool> applied{false};
  std::thread writer([&] {
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("1"));
    applied.store(f.manager.Apply(request).ok());
  });
  entered.WaitForNotification();
  std::atomic<bool> finished_when_removed{false};
  std::thread remover([&] {
    f.manager.RemoveListener(id);
    finished_when_removed.store(finished.load());
  });
  release.Notify();
  remover.join();
  writer.join();
  REQUIRE(applied.load());
  REQUIRE(finished_when_removed.load());
  f.Apply("2");
  REQUIRE(calls.load() == 1);
}

}  // namespace
}  // namespace codeco::acm
