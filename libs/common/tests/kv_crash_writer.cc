// The writer of common_kv_crash_test, run as a process of its own:
//
//   kv_crash_writer DIR SYNC ACK_FD
//
// opens a RocksDbKvStore at DIR (SYNC 1: fsync every write), then writes
// batches forever, acknowledging each by writing its index (a uint32_t) to
// ACK_FD, until the test kills it. The test starts it with fork + exec, not
// by carrying on in the forked child: the test process already runs RocksDB's
// threads after its first round, and a fork of a multi-threaded process may
// only call async-signal-safe functions before exec.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "codeco/common/rocksdb_kv_store.h"

namespace {

std::string Key(uint32_t i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "k%08u", i);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: kv_crash_writer DIR SYNC ACK_FD\n");
    return 2;
  }
  const std::string dir = argv[1];
  const bool sync = std::string(argv[2]) == "1";
  const int ack_fd = std::atoi(argv[3]);
  auto store =
      codeco::OpenRocksDbKvStore({.path = dir, .column_families = {"apps", "index"}, .sync = sync});
  if (!store.ok()) return 3;
  for (uint32_t i = 0;; ++i) {
    codeco::KvWriteBatch batch;
    // Two families in one batch: both or neither must survive.
    batch.Put("apps", Key(i), "value-" + std::to_string(i) + std::string(200, 'x'));
    batch.Put("index", Key(i), std::to_string(i));
    if (!(*store)->Write(batch).ok()) return 4;
    if (write(ack_fd, &i, sizeof i) != sizeof i) return 5;
  }
}
