// Crash test: a child process (kv_crash_writer) writes to a RocksDbKvStore and
// reports every acknowledged write through a pipe; the parent kills it with SIGKILL in the
// middle of the stream, reopens the database and checks that every
// acknowledged write is there and that no batch is half-applied.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include "codeco/common/rocksdb_kv_store.h"

namespace codeco {
namespace {

std::string Key(uint32_t i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "k%08u", i);
  return buf;
}

void RunCrashRound(bool sync, uint32_t kill_after, uint64_t seed) {
  auto dir = (std::filesystem::temp_directory_path() /
              ("codeco-crash-" + std::to_string(getpid()) + "-" + std::to_string(seed)))
                 .string();
  std::filesystem::remove_all(dir);
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  // The writer is a fresh process (kv_crash_writer.cc says why): all the child
  // needs before exec is built here, before the fork.
  const std::string sync_arg = sync ? "1" : "0";
  const std::string fd_arg = std::to_string(fds[1]);
  char* const argv[] = {const_cast<char*>(CODECO_KV_CRASH_WRITER), const_cast<char*>(dir.c_str()),
                        const_cast<char*>(sync_arg.c_str()), const_cast<char*>(fd_arg.c_str()),
                        nullptr};
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    execve(CODECO_KV_CRASH_WRITER, argv, environ);
    _exit(127);
  }
  close(fds[1]);

  std::set<uint32_t> acknowledged;
  uint32_t index;
  while (acknowledged.size() < kill_after && read(fds[0], &index, sizeof index) == sizeof index) {
    acknowledged.insert(index);
  }
  REQUIRE(kill(pid, SIGKILL) == 0);
  // Acks already in the pipe were given before the kill; they count too.
  while (read(fds[0], &index, sizeof index) == sizeof index) acknowledged.insert(index);
  close(fds[0]);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  REQUIRE(WIFSIGNALED(wstatus));
  REQUIRE(WTERMSIG(wstatus) == SIGKILL);
  REQUIRE(acknowledged.size() >= kill_after);

  auto store = OpenRocksDbKvStore({.path = dir, .column_families = {"apps", "index"}});
  REQUIRE(store.ok());
  for (uint32_t i : acknowledged) {
    auto value = (*store)->Get("apps", Key(i));
    INFO("acknowledged key " << Key(i));
    REQUIRE(value.ok());
    REQUIRE(value->starts_with("value-" + std::to_string(i)));
  }
  // Every batch is whole: the two families hold exactly the same keys.
  std::vector<std::string> apps, idx;
  REQUIRE((*store)->Scan("apps", {}, [&](std::string_view k, std::string_view) {
    apps.emplace_back(k);
    return true;
  }).ok());
  REQUIRE((*store)->Scan("index", {}, [&](std::string_view k, std::string_view) {
    idx.emplace_back(k);
    return true;
  }).ok());
  REQUIRE(apps == idx);
  // Writes are sequential, so what survived is a prefix 0..n-1 covering all acks.
  REQUIRE(apps.size() >= acknowledged.size());
  REQUIRE(apps.back() == Key(static_cast<uint32_t>(apps.size() - 1)));
  store->reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("SIGKILL mid-stream loses no acknowledged write (WAL no fsync)") {
  std::mt19937_64 rng(20261122);
  for (int round = 0; round < 3; ++round) {
    uint32_t kill_after = 500 + static_cast<uint32_t>(rng() % 3000);
    RunCrashRound(/*sync=*/false, kill_after, rng());
  }
}

TEST_CASE("SIGKILL mid-stream loses no acknowledged write (WAL with fsync)") {
  std::mt19937_64 rng(7);
  RunCrashRound(/*sync=*/true, 50 + static_cast<uint32_t>(rng() % 100), rng());
}

}  // namespace
}  // namespace codeco
