#pragma once
// The replica's side of Redis replication, as much of it as takes one RDB
// snapshot from a running Redis without touching its disk: connect as a
// replica that wants only the RDB ("REPLCONF capa eof", "REPLCONF rdb-only
// 1", then "PSYNC ? -1"), wait for "+FULLRESYNC" (the master has forked: the
// snapshot is fixed), then read the RDB as the master sends it. The master
// frames it either as a diskless master does, "$EOF:<40-byte mark>\r\n",
// the RDB, the mark again, or as a disk-based one does, "$<length>\r\n" and
// that many bytes; before a reply and before the payload it may send bare
// "\n" keepalives. Whether the master syncs diskless, with what
// compression, is its configuration: the caller's business
// (RedisCheckpointHook::StreamCheckpoint sets it).
//
// Plain POSIX sockets, non-blocking, every wait bounded by poll(); sends
// use MSG_NOSIGNAL; EINTR is retried. The mirror image of redis_feed.h.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpointer/core/state_driver.h"

namespace codeco::checkpointer {

/// The RDB of one full resynchronisation, read from the master's socket on
/// the reader's thread as it arrives. Not thread-safe (one reader). Safe to
/// destroy at any point: it closes its socket, and a master whose replica
/// hangs up just drops it (a diskless master also ends the fork that was
/// producing the RDB once no replica is left).
class RedisSnapshotStream final : public StateStream {
 public:
  /// Connects to the Redis at `host`:`port`, asks for a full
  /// resynchronisation of the RDB alone, and returns once the master
  /// replied "+FULLRESYNC <replication id> <offset>": it has forked (a
  /// diskless master sends the reply in the same turn of its event loop as
  /// the fork, a disk-based one right after it), so no command runs in
  /// between and the RDB that follows is the dataset of that moment.
  /// `timeout` bounds the whole handshake (a master that is already saving
  /// for another replica makes it wait for the next save) and, later, each
  /// wait for more bytes of the RDB. UNAVAILABLE when the master cannot be
  /// reached or hangs up, DEADLINE_EXCEEDED when it does not answer in
  /// time, FAILED_PRECONDITION when it refuses (a "-ERR" reply: a replica
  /// that cannot take an EOF-marked RDB, a master still loading, ...). An
  /// error to "REPLCONF rdb-only" (Redis before 7.0) is not one: the RDB
  /// comes anyway, the master merely prepares to stream what follows it.
  static absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> Open(const std::string& host,
                                                                   int port,
                                                                   absl::Duration timeout);
  ~RedisSnapshotStream() override;
  RedisSnapshotStream(const RedisSnapshotStream&) = delete;
  RedisSnapshotStream& operator=(const RedisSnapshotStream&) = delete;

  /// Copies the next bytes of the RDB (the framing left out), at most
  /// `max`, waiting until some arrive; 0 at its end (the socket is then
  /// closed). Of an EOF-marked RDB it never hands out the last 40 bytes
  /// received until more arrive: they could be the mark. UNAVAILABLE naming
  /// the master when it hangs up before the end or sends nothing for the
  /// `timeout` Open was given; DATA_LOSS when the payload header is
  /// malformed. An error ends the stream: every later Read returns it.
  absl::StatusOr<size_t> Read(char* buffer, size_t max) override;

  /// The replication id of the full resynchronisation ("+FULLRESYNC <id> …").
  const std::string& replication_id() const { return replication_id_; }
  /// Its replication offset.
  int64_t replication_offset() const { return replication_offset_; }
  /// Whether the master accepted "REPLCONF rdb-only 1".
  bool rdb_only() const { return rdb_only_; }
  /// Bytes of the RDB handed out so far.
  int64_t rdb_bytes_read() const { return rdb_bytes_read_; }
  /// Whether the payload is EOF-marked (diskless); false until its header
  /// has been read (the first Read) and for a length-prefixed one.
  bool eof_marked() const { return framing_ == Framing::kEofMarked; }

  /// Hangs up on the master; idempotent, also done when the object goes.
  void Close();

 private:
  enum class Framing { kUnknown, kEofMarked, kLength };

  RedisSnapshotStream(int fd, std::string where, absl::Duration timeout);
  // Sends `argv` as a RESP array and returns its reply line (keepalives
  // skipped, "\r\n" removed) by `deadline`.
  absl::StatusOr<std::string> Ask(const std::vector<std::string>& argv, absl::Time deadline);
  // The next line of the buffer ("\r\n" or "\n" removed) after any bare "\n"
  // keepalives, receiving more until `deadline` (then `what` is what timed out).
  absl::StatusOr<std::string> ReadLine(absl::Time deadline, absl::string_view what);
  // Receives more bytes into the buffer, waiting until `deadline`; `what`
  // says what was being waited for. Compacts the buffer first when it is full.
  absl::Status Receive(absl::Time deadline, absl::string_view what);
  // Parses the payload header once the buffer holds it (false: not yet).
  absl::StatusOr<bool> ParseHeader();
  // Records that the stream ended with `status` and closes the socket.
  absl::Status Fail(absl::Status status);
  // Bytes held in the buffer, not handed out yet.
  size_t buffered() const { return end_ - begin_; }

  int fd_ = -1;
  std::string where_;       // "host:port" of the master
  absl::Duration timeout_;  // the longest wait for more bytes
  std::string replication_id_;
  int64_t replication_offset_ = 0;
  bool rdb_only_ = false;
  std::vector<char> buffer_;  // received bytes in [begin_, end_)
  size_t begin_ = 0;
  size_t end_ = 0;
  Framing framing_ = Framing::kUnknown;
  std::string eof_mark_;        // kEofMarked: the 40 bytes that end the RDB
  bool mark_received_ = false;  // kEofMarked: the buffer ends with the mark
  int64_t length_left_ = 0;     // kLength: RDB bytes not received yet
  int64_t rdb_bytes_read_ = 0;
  bool done_ = false;   // the whole RDB was handed out
  absl::Status error_;  // what ended the stream early
};

}  // namespace codeco::checkpointer
