#pragma once
// The master's side of Redis's replication protocol, as much of it as hands
// one RDB to one replica: listen, answer the replica's handshake (PING,
// AUTH, REPLCONF, then PSYNC with a full resynchronisation), and send the
// RDB with the framing a diskless master uses, "$EOF:<40-byte mark>\r\n",
// the RDB, the mark again, so its size need not be known in advance. A
// replica told to load diskless (repl-diskless-load) parses the RDB straight
// from the socket as it arrives and checks its CRC64 at the end. What the
// replica is told (REPLICAOF, its config) and when it has loaded is the
// caller's business (RedisCheckpointHook::RestoreInto).
//
// Plain POSIX sockets, non-blocking, every wait bounded by poll(); sends
// use MSG_NOSIGNAL (a replica that hangs up raises no SIGPIPE).

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace codeco::checkpointer {

/// A one-shot replication master serving one RDB to one replica. Not
/// thread-safe. Requires a replica that announces "capa eof" (Redis 2.8.18
/// and later do).
class RedisFeed {
 public:
  /// Listens on `host` (an address of this machine the replica reaches it
  /// at), on an ephemeral port. UNAVAILABLE when it cannot.
  static absl::StatusOr<std::unique_ptr<RedisFeed>> Listen(const std::string& host);
  ~RedisFeed();
  RedisFeed(const RedisFeed&) = delete;
  RedisFeed& operator=(const RedisFeed&) = delete;

  /// The port it listens on.
  int port() const { return port_; }
  /// The password a replica must AUTH with before it is served (random,
  /// per feed): set it as the replica's masterauth. A connection that asks
  /// for the RDB without it is dropped and the feed waits for the next one,
  /// so nothing else reaching the port gets the data.
  const std::string& password() const { return password_; }

  /// Waits until `deadline` for a replica to connect, answers its handshake
  /// and its PSYNC (or SYNC) with a full resynchronisation; returns once the
  /// RDB may follow. DEADLINE_EXCEEDED when no replica connects or finishes
  /// its handshake in time, UNAVAILABLE when it hangs up,
  /// FAILED_PRECONDITION when it cannot take an EOF-marked RDB.
  absl::Status AcceptReplica(absl::Time deadline);
  /// Sends the header of the RDB transfer. The Send* calls fail with
  /// UNAVAILABLE once the replica has hung up, DEADLINE_EXCEEDED when it
  /// takes no byte for `stall_timeout`.
  absl::Status BeginRdb(absl::Duration stall_timeout);
  /// Sends the next bytes of the RDB (all of them, or fails).
  absl::Status SendRdb(absl::string_view bytes, absl::Duration stall_timeout);
  /// Ends the RDB (the mark again): the replica has it all once it reads it.
  absl::Status EndRdb(absl::Duration stall_timeout);
  /// Reads and drops what the replica sends (its REPLCONF ACKs) until
  /// `deadline`; UNAVAILABLE once the replica has hung up.
  absl::Status Drain(absl::Time deadline);
  /// Bytes of the RDB sent so far (the framing not counted).
  int64_t rdb_bytes_sent() const { return rdb_bytes_sent_; }

  /// Hangs up on the replica (a load in progress fails as a dropped link)
  /// and stops listening; idempotent, also done when the object goes.
  void Close();

 private:
  RedisFeed(int listener, int port) : listener_(listener), port_(port) {}
  // Writes all of `bytes` to the replica.
  absl::Status SendAll(absl::string_view bytes, absl::Duration stall_timeout);
  // Answers the commands complete in `input_`; sets `*resync` once the
  // replica asked for the RDB.
  absl::Status Answer(bool* resync, absl::Duration stall_timeout);

  int listener_ = -1;
  int port_ = 0;
  int replica_ = -1;
  std::string input_;         // what the replica sent, not yet answered
  bool eof_capable_ = false;  // the replica announced "REPLCONF capa eof"
  bool authenticated_ = false;  // it sent AUTH with password_
  std::string password_;
  std::string eof_mark_;      // 40 random characters of [0-9a-f]
  int64_t rdb_bytes_sent_ = 0;
};

}  // namespace codeco::checkpointer
