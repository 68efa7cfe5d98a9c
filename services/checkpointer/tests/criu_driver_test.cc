// The CRIU driver. The real criu where `criu check` passes: a process tree
// is dumped, killed, restored and seen running on from its dumped state.
// Where it fails (containers, our CI) the test checks that Available() says
// why, in criu's own words, and warns that the round trip was not run. The
// driver's own logic (arguments, logs kept on failure, timeouts, signals to
// the tree, Verify) runs everywhere against fake criu scripts and children
// of this test.
#include "checkpointer/drivers/criu_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::Scratch;

// Waits up to `limit` for `condition`.
bool WaitFor(const std::function<bool()>& condition, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// A child of this test running `args`, its stdio on /dev/null; killed and
// reaped at the end unless the test reaped it.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    for (int fd = 0; fd < 3; ++fd) {
      posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Waits for it to end; its wait status.
  int Reap() {
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return status;
  }
  // True while it has not ended.
  bool Running() {
    int status = 0;
    return pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  pid_t pid_ = -1;
};

// A process id no process can have (above the kernel's pid_max), so no
// signal the test sends can reach a stranger that reused a freed pid.
int64_t NoSuchPid() {
  int64_t pid_max = 0;
  REQUIRE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile("/proc/sys/kernel/pid_max")), &pid_max));
  return pid_max + 1;
}

ContainerTarget Target(int64_t pid) {
  ContainerTarget t;
  t.cluster = "codef-a";
  t.node = "node-a";
  t.pod = "worker-0";
  t.container = "worker";
  t.pid = pid;
  return t;
}

// A stand-in criu: `check`, `dump` and `restore` behave as `mode` says
// ("good", "bad", "slow"); every call's arguments are appended to
// `<scratch>/args`.
fs::path FakeCriu(const fs::path& scratch, const std::string& mode) {
  const fs::path script = scratch / ("criu-" + mode);
  std::ofstream out(script);
  out << "#!/bin/sh\n"
      << "echo \"$*\" >> '" << (scratch / "args").string() << "'\n"
      << "cmd=\"$1\"; shift; dir=; log=; pidfile=; pid=\n"
      << "while [ $# -gt 0 ]; do\n"
      << "  case \"$1\" in -D) dir=\"$2\"; shift;; -o) log=\"$2\"; shift;;\n"
      << "    --pidfile) pidfile=\"$2\"; shift;; -t) pid=\"$2\"; shift;; esac; shift\n"
      << "done\n";
  if (mode == "good") {
    out << "case \"$cmd\" in\n"
        << "  check) echo 'Looks good.'; exit 0;;\n"
        << "  dump) printf 'core' > \"$dir/core-$pid.img\"; printf 'tree' > \"$dir/pstree.img\"\n"
        << "        echo '(00.010) Dumping finished successfully' > \"$dir/$log\"; exit 0;;\n"
        << "  restore) echo 4242 > \"$pidfile\"\n"
        << "        echo '(00.020) Restore finished successfully' > \"$dir/$log\"; exit 0;;\n"
        << "esac\n";
  } else if (mode == "bad") {
    out << "case \"$cmd\" in\n"
        << "  check) echo 'Error (criu/kerndat.c:1): fake: no kernel features' >&2; exit 1;;\n"
        << "  dump) echo '(00.001) Dumping starts' > \"$dir/$log\"\n"
        << "        echo \"(00.002) Error (criu/cr-dump.c:2): fake: cannot seize $pid\" >> "
           "\"$dir/$log\"; exit 1;;\n"
        << "  restore) echo '(00.001) Error (criu/cr-restore.c:3): fake: pid taken' > "
           "\"$dir/$log\"; exit 1;;\n"
        << "esac\n";
  } else {
    out << "exec sleep 60\n";
  }
  out.close();
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

std::vector<std::string> Calls(const fs::path& scratch) {
  std::vector<std::string> lines = absl::StrSplit(ReadFile(scratch / "args"), '\n', absl::SkipEmpty());
  return lines;
}

TEST_CASE("criu driver says why criu cannot run here or finds that it can") {
  const absl::Status available = CriuDriver::Available();
  CriuDriver driver({});
  Child sleeper({"sleep", "1000"});
  if (available.ok()) {
    WARN("criu check passes here: the dump and restore round trip runs");
    CHECK(driver.Handles(Target(sleeper.pid())));
    return;
  }
  INFO(available);
  CHECK(available.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_FALSE(driver.Handles(Target(sleeper.pid())));
  if (std::system("command -v criu >/dev/null 2>&1") != 0) {
    CHECK(absl::StrContains(available.message(), "install criu"));
    WARN("criu is not installed, so the dump and restore round trip is not run: "
         << available.message());
    return;
  }
  // criu's own words are in the status: the last line it printed.
  std::string said;
  if (FILE* p = popen("criu check 2>&1", "r")) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, p)) > 0) said.append(buffer, n);
    pclose(p);
  }
  std::vector<std::string> lines = absl::StrSplit(said, '\n', absl::SkipWhitespace());
  REQUIRE_FALSE(lines.empty());
  CHECK(absl::StrContains(available.message(), "criu check"));
  CHECK(absl::StrContains(available.message(), absl::StripAsciiWhitespace(lines.back())));
  // Asked again: the same answer, without running criu again.
  CHECK(CriuDriver::Available() == available);
  WARN("criu check fails here, so the dump and restore round trip is not run: "
       << available.message());
}

TEST_CASE("criu driver names a criu binary that cannot run or fails its check") {
  Scratch scratch;
  absl::Status missing = CriuDriver::Available("/nonexistent/criu");
  INFO(missing);
  CHECK(missing.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(missing.message(), "/nonexistent/criu"));
  CHECK(absl::StrContains(missing.message(), "No such file or directory"));

  const fs::path bad = FakeCriu(scratch.path, "bad");
  absl::Status failed = CriuDriver::Available(bad.string());
  INFO(failed);
  CHECK(failed.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(failed.message(), "check exited with 1"));
  CHECK(absl::StrContains(failed.message(), "fake: no kernel features"));
  CriuDriver driver({.criu_binary = bad.string()});
  CHECK_FALSE(driver.Handles(Target(getpid())));

  const fs::path good = FakeCriu(scratch.path, "good");
  CHECK(CriuDriver::Available(good.string()).ok());
  CriuDriver usable({.criu_binary = good.string()});
  CHECK(usable.name() == "criu");
  CHECK(usable.Handles(Target(getpid())));
  CHECK_FALSE(usable.Handles(Target(0)));
  CHECK_FALSE(usable.Handles(Target(1)));
}

TEST_CASE("criu driver dumps with the options it was given") {
  Scratch scratch;
  const fs::path good = FakeCriu(scratch.path, "good");
  Child sleeper({"sleep", "1000"});
  const std::string pid = absl::StrCat(sleeper.pid());

  SECTION("crash-consistent by default") {
    CriuDriver driver({.criu_binary = good.string()});
    const fs::path dir = scratch.path / "dumps" / "one";
    absl::StatusOr<StateDump> dump = driver.Checkpoint(Target(sleeper.pid()), dir);
    INFO(dump.status());
    REQUIRE(dump.ok());
    CHECK(dump->directory == dir);
    CHECK(ReadFile(dir / ("core-" + pid + ".img")) == "core");
    CHECK(fs::exists(dir / kCriuDumpLog));
    CHECK(dump->bytes == static_cast<int64_t>(8 + fs::file_size(dir / kCriuDumpLog)));
    CHECK(dump->facts.at(kDriverFact) == "criu");
    CHECK(dump->facts.at(kCriuPidFact) == pid);
    CHECK(dump->facts.at(kCriuCommFact) == "sleep");
    REQUIRE(Calls(scratch.path).size() == 1);
    CHECK(Calls(scratch.path)[0] == absl::StrCat("dump -t ", pid, " -D ", dir.string(),
                                                 " --shell-job --leave-running -o dump.log"));
    // Nothing to lift: the tree ran on.
    CHECK(driver.Resume(Target(sleeper.pid())).ok());
    CHECK(sleeper.Running());

    absl::StatusOr<int64_t> restored = driver.Restore(dir);
    INFO(restored.status());
    REQUIRE(restored.ok());
    CHECK(*restored == 4242);
    CHECK(Calls(scratch.path)[1] == absl::StrCat("restore -D ", dir.string(),
                                                 " -d --shell-job -o restore.log --pidfile ",
                                                 (dir / "restore.pid").string()));
  }
  SECTION("fenced and with TCP connections when asked") {
    CriuDriver driver(
        {.criu_binary = good.string(), .tcp_established = true, .stop_after_dump = true});
    absl::StatusOr<StateDump> dump = driver.Checkpoint(Target(sleeper.pid()), scratch.path / "d");
    INFO(dump.status());
    REQUIRE(dump.ok());
    REQUIRE(Calls(scratch.path).size() == 1);
    CHECK(absl::StrContains(Calls(scratch.path)[0], "--leave-stopped"));
    CHECK(absl::StrContains(Calls(scratch.path)[0], "--tcp-established"));
    CHECK_FALSE(absl::StrContains(Calls(scratch.path)[0], "--leave-running"));
    REQUIRE(driver.Restore(scratch.path / "d").ok());
    CHECK(absl::StrContains(Calls(scratch.path)[1], "--tcp-established"));
  }
}

TEST_CASE("criu driver keeps the log of a failed dump and leaves the process running") {
  Scratch scratch;
  const fs::path bad = FakeCriu(scratch.path, "bad");
  Child sleeper({"sleep", "1000"});
  CriuDriver driver({.criu_binary = bad.string(), .stop_after_dump = true});
  const fs::path dir = scratch.path / "dump";

  absl::StatusOr<StateDump> dump = driver.Checkpoint(Target(sleeper.pid()), dir);
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(dump.status().message(), absl::StrCat("pid ", sleeper.pid())));
  CHECK(absl::StrContains(dump.status().message(), "exited with 1"));
  CHECK(absl::StrContains(dump.status().message(),
                          absl::StrCat("fake: cannot seize ", sleeper.pid())));
  CHECK_FALSE(absl::StrContains(dump.status().message(), "Dumping starts"));
  const fs::path kept = scratch.path / "dump.dump.log";
  CHECK(absl::StrContains(dump.status().message(), "log kept at " + kept.string()));
  CHECK(absl::StrContains(ReadFile(kept), "Dumping starts"));
  CHECK_FALSE(fs::exists(dir));
  CHECK(sleeper.Running());

  fs::create_directories(scratch.path / "image");
  absl::StatusOr<int64_t> restored = driver.Restore(scratch.path / "image");
  INFO(restored.status());
  CHECK(restored.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(restored.status().message(), "fake: pid taken"));
  CHECK(absl::StrContains(restored.status().message(),
                          (scratch.path / "image" / "restore.log").string()));
  CHECK(driver.Restore(scratch.path / "none").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("criu driver stops a criu run that outlasts its timeout") {
  Scratch scratch;
  const fs::path slow = FakeCriu(scratch.path, "slow");
  Child sleeper({"sleep", "1000"});
  CriuDriver driver({.criu_binary = slow.string(), .timeout = absl::Milliseconds(300)});
  const absl::Time start = absl::Now();
  absl::StatusOr<StateDump> dump = driver.Checkpoint(Target(sleeper.pid()), scratch.path / "d");
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(dump.status().message(), "timed out"));
  CHECK(absl::Now() - start < absl::Seconds(30));
  CHECK_FALSE(fs::exists(scratch.path / "d"));
  CHECK(sleeper.Running());
}

TEST_CASE("criu driver refuses a target it cannot dump") {
  Scratch scratch;
  CriuDriver driver({.criu_binary = FakeCriu(scratch.path, "good").string()});
  CHECK(driver.Checkpoint(Target(0), scratch.path / "d").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(driver.Checkpoint(Target(1), scratch.path / "d").status().code() ==
        absl::StatusCode::kInvalidArgument);
  absl::StatusOr<StateDump> dump = driver.Checkpoint(Target(NoSuchPid()), scratch.path / "d");
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kNotFound);
  Child sleeper({"sleep", "1000"});
  fs::create_directories(scratch.path / "exists");
  CHECK(driver.Checkpoint(Target(sleeper.pid()), scratch.path / "exists").status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(ReadFile(scratch.path / "args").empty());  // criu was never run
}

TEST_CASE("criu driver retires the whole process tree and resumes a stopped one") {
  Scratch scratch;
  // Orphans of the tree become this test's children, so it can reap them.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  CriuDriver driver({.stop_after_dump = true});

  SECTION("retire") {
    const fs::path pidfile = scratch.path / "grandchild";
    Child parent({"sh", "-c", "sleep 1000 & echo $! > " + pidfile.string() + "; wait"});
    int64_t grandchild = 0;
    REQUIRE(WaitFor(
        [&] { return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pidfile)), &grandchild); }));
    REQUIRE(driver.Retire(Target(parent.pid())).ok());
    const int status = parent.Reap();
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    int grandchild_status = 0;
    REQUIRE(waitpid(static_cast<pid_t>(grandchild), &grandchild_status, 0) == grandchild);
    CHECK(WIFSIGNALED(grandchild_status));
    CHECK(WTERMSIG(grandchild_status) == SIGKILL);
    // Gone already: nothing to do.
    CHECK(driver.Retire(Target(NoSuchPid())).ok());
    CHECK(driver.Retire(Target(0)).code() == absl::StatusCode::kInvalidArgument);
    CHECK(driver.Retire(Target(1)).code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("resume") {
    Child sleeper({"sleep", "1000"});
    int status = 0;
    REQUIRE(kill(sleeper.pid(), SIGSTOP) == 0);
    REQUIRE(waitpid(sleeper.pid(), &status, WUNTRACED) == sleeper.pid());
    REQUIRE(WIFSTOPPED(status));
    REQUIRE(driver.Resume(Target(sleeper.pid())).ok());
    REQUIRE(waitpid(sleeper.pid(), &status, WCONTINUED) == sleeper.pid());
    CHECK(WIFCONTINUED(status));
  }
}

TEST_CASE("criu driver verifies the restored process runs the dumped program") {
  CriuDriver driver({});
  Child sleeper({"sleep", "1000"});
  const std::map<std::string, std::string> facts = {{kDriverFact, "criu"},
                                                    {kCriuCommFact, "sleep"}};
  absl::Status st = driver.Verify(Target(sleeper.pid()), facts);
  INFO(st);
  CHECK(st.ok());
  st = driver.Verify(Target(sleeper.pid()), {{kDriverFact, "criu"}, {kCriuCommFact, "redis"}});
  CHECK(st.code() == absl::StatusCode::kDataLoss);
  CHECK(absl::StrContains(st.message(), "\"redis\""));
  st = driver.Verify(Target(sleeper.pid()), {{kDriverFact, "kubelet"}});
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);

  int status = 0;
  REQUIRE(kill(sleeper.pid(), SIGSTOP) == 0);
  REQUIRE(waitpid(sleeper.pid(), &status, WUNTRACED) == sleeper.pid());
  CHECK(driver.Verify(Target(sleeper.pid()), facts).code() ==
        absl::StatusCode::kFailedPrecondition);
  // Ended but not reaped (a zombie), and no such process at all.
  REQUIRE(kill(sleeper.pid(), SIGKILL) == 0);
  REQUIRE(WaitFor([&] {
    return ReadFile(absl::StrCat("/proc/", sleeper.pid(), "/stat")).find(") Z") != std::string::npos;
  }));
  CHECK(driver.Verify(Target(sleeper.pid()), facts).code() == absl::StatusCode::kNotFound);
  sleeper.Reap();
  CHECK(driver.Verify(Target(NoSuchPid()), facts).code() == absl::StatusCode::kNotFound);
}

// The counter the round trip's process last wrote; -1 before its first.
int64_t Counter(const fs::path& file) {
  int64_t n = -1;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(file)), &n) ? n : -1;
}

TEST_CASE("criu driver dumps and restores a running process where criu check passes") {
  const absl::Status available = CriuDriver::Available();
  Scratch scratch;
  if (!available.ok()) {
    if (!absl::StrContains(available.message(), "install criu")) {
      // The real criu is there but cannot work: a dump fails as the driver
      // promises, in criu's words, and the process runs on.
      Child sleeper({"sleep", "1000"});
      CriuDriver driver({});
      absl::StatusOr<StateDump> dump =
          driver.Checkpoint(Target(sleeper.pid()), scratch.path / "dump");
      INFO(dump.status());
      CHECK(dump.status().code() == absl::StatusCode::kFailedPrecondition);
      CHECK(absl::StrContains(dump.status().message(), "Error (criu/"));
      CHECK(absl::StrContains(dump.status().message(), "log kept at"));
      CHECK(fs::exists(scratch.path / "dump.dump.log"));
      CHECK_FALSE(fs::exists(scratch.path / "dump"));
      CHECK(sleeper.Running());
    }
    WARN("the criu dump and restore round trip is not run: " << available.message());
    return;
  }
  // The restored tree is re-parented to this test when criu detaches.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  auto reap_all = [] {
    while (waitpid(-1, nullptr, 0) > 0) {
    }
  };
  const fs::path counter = scratch.path / "counter";
  // A shell counting in its memory, writing each value to `counter`.
  const std::string loop =
      absl::StrCat("i=0; while :; do i=$((i+1)); echo $i > ", counter.string(), ".tmp; mv ",
                   counter.string(), ".tmp ", counter.string(), "; sleep 0.05; done");
  Child shell({"sh", "-c", loop});
  REQUIRE(WaitFor([&] { return Counter(counter) >= 10; }));
  const int64_t before = Counter(counter);

  CriuDriver driver({});
  REQUIRE(driver.Handles(Target(shell.pid())));
  const fs::path dir = scratch.path / "dump";
  absl::StatusOr<StateDump> dump = driver.Checkpoint(Target(shell.pid()), dir);
  INFO(dump.status());
  REQUIRE(dump.ok());
  CHECK(dump->bytes > 0);
  CHECK(dump->facts.at(kCriuCommFact) == "sh");
  CHECK(shell.Running());  // --leave-running

  // The source goes (and every pid of its tree is free again) ...
  REQUIRE(driver.Retire(Target(shell.pid())).ok());
  shell.Reap();
  reap_all();
  fs::remove(counter);

  // ... and the restored one counts on from the dumped count, not from 1.
  absl::StatusOr<int64_t> restored = driver.Restore(dir);
  INFO(restored.status());
  REQUIRE(restored.ok());
  int64_t first = -1;
  REQUIRE(WaitFor([&] { return (first = Counter(counter)) > 0; }));
  CHECK(first > before);
  REQUIRE(WaitFor([&] { return Counter(counter) > first; }));
  CHECK(driver.Verify(Target(*restored), dump->facts).ok());

  REQUIRE(driver.Retire(Target(*restored)).ok());
  reap_all();
}

}  // namespace
}  // namespace codeco::checkpointer
