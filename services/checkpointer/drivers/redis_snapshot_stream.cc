#include "checkpointer/drivers/redis_snapshot_stream.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpointer/drivers/socket_wait.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "codeco/common/status.h"

namespace codeco::checkpointer {
namespace {

// Length of a diskless master's EOF mark (a replication id's length).
constexpr size_t kMarkSize = 40;
// What the socket is read into: the most an RDB read takes at once.
constexpr size_t kBufferSize = 256 << 10;
// Longest reply line of the handshake and longest payload header accepted
// (a "+FULLRESYNC" line is about 60 bytes, a header 47).
constexpr size_t kMaxLine = 4096;

// A non-blocking TCP connection to `host`:`port` made by `deadline`.
absl::StatusOr<int> ConnectTo(const std::string& host, int port, absl::Time deadline) {
  const std::string where = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("the redis at ", where, ": cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = ErrnoText(errno);
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && (errno == EINPROGRESS || errno == EINTR)) {
      absl::Status ready = WaitFor(fd, POLLOUT, deadline, "the connection");
      if (!ready.ok()) {
        last_error = std::string(ready.message());
        close(fd);
        continue;
      }
      int error = 0;
      socklen_t length = sizeof(error);
      rc = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0 ? 0 : -1;
      if (rc != 0) errno = error != 0 ? error : errno;
    }
    if (rc == 0) {
      freeaddrinfo(found);
      // The handshake is small requests and replies: no Nagle delay.
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last_error = ErrnoText(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("cannot connect to the redis at ", where, ": ", last_error));
}

// `argv` as a RESP array of bulk strings.
std::string Resp(const std::vector<std::string>& argv) {
  std::string out = absl::StrCat("*", argv.size(), "\r\n");
  for (const std::string& a : argv) absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
  return out;
}

// At most 64 bytes of `bytes`, escaped, for a message.
std::string Quoted(absl::string_view bytes) {
  return absl::StrCat("\"", absl::CHexEscape(bytes.substr(0, 64)),
                      bytes.size() > 64 ? "\"…" : "\"");
}

}  // namespace

RedisSnapshotStream::RedisSnapshotStream(int fd, std::string where, absl::Duration timeout)
    : fd_(fd), where_(std::move(where)), timeout_(timeout), buffer_(kBufferSize) {}

RedisSnapshotStream::~RedisSnapshotStream() { Close(); }

void RedisSnapshotStream::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> RedisSnapshotStream::Open(
    const std::string& host, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ASSIGN_OR_RETURN(int fd, ConnectTo(host, port, deadline));
  std::unique_ptr<RedisSnapshotStream> stream(
      new RedisSnapshotStream(fd, absl::StrCat(host, ":", port), timeout));
  const std::string& where = stream->where_;
  // An EOF-marked RDB can be sent while it is produced (diskless): say we
  // take one, or a master configured diskless would save to disk for us.
  ASSIGN_OR_RETURN(std::string capa, stream->Ask({"REPLCONF", "capa", "eof"}, deadline));
  if (capa != "+OK") {
    return absl::FailedPreconditionError(
        absl::StrCat("the redis at ", where, " refused REPLCONF capa eof: ", Quoted(capa)));
  }
  // Only the RDB, not the replication stream after it (Redis 7.0 and later;
  // an older one says "-ERR" and sends the RDB all the same).
  ASSIGN_OR_RETURN(std::string rdb_only, stream->Ask({"REPLCONF", "rdb-only", "1"}, deadline));
  stream->rdb_only_ = rdb_only == "+OK";
  ASSIGN_OR_RETURN(std::string psync, stream->Ask({"PSYNC", "?", "-1"}, deadline));
  std::vector<absl::string_view> words = absl::StrSplit(psync, ' ', absl::SkipEmpty());
  if (words.size() != 3 || words[0] != "+FULLRESYNC" ||
      !absl::SimpleAtoi(words[2], &stream->replication_offset_)) {
    return absl::FailedPreconditionError(absl::StrCat("the redis at ", where,
                                                      " answered PSYNC ? -1 with ", Quoted(psync),
                                                      ", not a full resynchronisation"));
  }
  stream->replication_id_ = std::string(words[1]);
  return stream;
}

absl::StatusOr<std::string> RedisSnapshotStream::Ask(const std::vector<std::string>& argv,
                                                     absl::Time deadline) {
  const std::string request = Resp(argv);
  const std::string what = absl::StrCat("the reply to ", argv[0], " ", argv[1]);
  absl::string_view left = request;
  while (!left.empty()) {
    const ssize_t n = send(fd_, left.data(), left.size(), MSG_NOSIGNAL);
    if (n > 0) {
      left.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      absl::Status ready = WaitFor(fd_, POLLOUT, deadline, absl::StrCat("to send ", argv[0]));
      if (!ready.ok()) {
        return absl::Status(ready.code(),
                            absl::StrCat("the redis at ", where_, ": ", ready.message()));
      }
    } else if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat("the redis at ", where_, " hung up: ", ErrnoText(errno)));
    }
  }
  return ReadLine(deadline, what);
}

absl::StatusOr<std::string> RedisSnapshotStream::ReadLine(absl::Time deadline,
                                                          absl::string_view what) {
  for (;;) {
    // Bare "\n" keepalives may come before a reply.
    while (begin_ < end_ && buffer_[begin_] == '\n') ++begin_;
    const char* at = buffer_.data() + begin_;
    const void* newline = std::memchr(at, '\n', buffered());
    if (newline != nullptr) {
      size_t length = static_cast<size_t>(static_cast<const char*>(newline) - at);
      begin_ += length + 1;
      if (length > 0 && at[length - 1] == '\r') --length;
      return std::string(at, length);
    }
    if (buffered() > kMaxLine) {
      return absl::FailedPreconditionError(
          absl::StrCat("the redis at ", where_, " sent a reply line longer than ", kMaxLine,
                       " bytes: ", Quoted(absl::string_view(at, buffered()))));
    }
    RETURN_IF_ERROR(Receive(deadline, what));
  }
}

absl::Status RedisSnapshotStream::Receive(absl::Time deadline, absl::string_view what) {
  if (fd_ < 0) return absl::FailedPreconditionError("the RDB stream is closed");
  if (begin_ == end_) begin_ = end_ = 0;
  if (end_ == buffer_.size() && begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, buffered());
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) {
    return absl::InternalError("the RDB stream's buffer is full");  // callers drain it first
  }
  for (;;) {
    const ssize_t n = recv(fd_, buffer_.data() + end_, buffer_.size() - end_, 0);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return absl::OkStatus();
    }
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("the redis at ", where_, " hung up while we waited for ", what));
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::Status ready = WaitFor(fd_, POLLIN, deadline, what);
      if (!ready.ok()) {
        return absl::Status(ready.code(),
                            absl::StrCat("the redis at ", where_, ": ", ready.message()));
      }
    } else if (errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("the redis at ", where_,
                                                 " broke the connection while we waited for ", what,
                                                 ": ", ErrnoText(errno)));
    }
  }
}

absl::StatusOr<bool> RedisSnapshotStream::ParseHeader() {
  // Bare "\n" keepalives may come while the master prepares the RDB.
  while (begin_ < end_ && buffer_[begin_] == '\n') ++begin_;
  const char* at = buffer_.data() + begin_;
  const void* newline = std::memchr(at, '\n', std::min(buffered(), kMaxLine));
  if (newline == nullptr) {
    if (buffered() < kMaxLine) return false;
    return absl::DataLossError(absl::StrCat(
        "the redis at ", where_,
        " began the RDB with no header line: ", Quoted(absl::string_view(at, buffered()))));
  }
  const size_t length = static_cast<size_t>(static_cast<const char*>(newline) - at);
  const absl::string_view line(at, length);
  auto malformed = [&] {
    return absl::DataLossError(absl::StrCat(
        "the redis at ", where_, " began the RDB with a malformed header ", Quoted(line)));
  };
  if (!absl::EndsWith(line, "\r") || !absl::StartsWith(line, "$")) return malformed();
  const absl::string_view value = line.substr(1, line.size() - 2);
  if (absl::StartsWith(value, "EOF:")) {
    if (value.size() != 4 + kMarkSize) return malformed();
    framing_ = Framing::kEofMarked;
    eof_mark_ = std::string(value.substr(4));
  } else {
    int64_t rdb_length = -1;
    if (!absl::SimpleAtoi(value, &rdb_length) || rdb_length < 0) return malformed();
    framing_ = Framing::kLength;
    length_left_ = rdb_length;
  }
  begin_ += length + 1;
  return true;
}

absl::Status RedisSnapshotStream::Fail(absl::Status status) {
  error_ = status;
  Close();
  return status;
}

absl::StatusOr<size_t> RedisSnapshotStream::Read(char* buffer, size_t max) {
  if (!error_.ok()) return error_;
  if (done_) return 0;
  if (max == 0) return 0;
  // The deadline is renewed by every byte that arrives: a stall, not a slow
  // stream, is an error.
  auto stalled = [&](absl::Status status) {
    if (absl::IsDeadlineExceeded(status)) {
      return Fail(absl::UnavailableError(absl::StrCat(
          "the redis at ", where_, " sent nothing of the RDB for ", absl::FormatDuration(timeout_),
          " (", rdb_bytes_read_, " bytes read): ", status.message())));
    }
    if (absl::IsUnavailable(status)) {
      return Fail(absl::UnavailableError(absl::StrCat(status.message(), " (", rdb_bytes_read_,
                                                      " bytes of the RDB read; it ended early)")));
    }
    return Fail(std::move(status));
  };
  while (framing_ == Framing::kUnknown) {
    absl::StatusOr<bool> parsed = ParseHeader();
    if (!parsed.ok()) return Fail(parsed.status());
    if (*parsed) break;
    absl::Status received = Receive(absl::Now() + timeout_, "the RDB to begin");
    if (!received.ok()) return stalled(std::move(received));
  }
  for (;;) {
    // Of an EOF-marked RDB the last kMarkSize bytes received are held back:
    // they may be the mark, or its beginning.
    if (framing_ == Framing::kEofMarked && !mark_received_ && buffered() >= kMarkSize) {
      mark_received_ =
          std::memcmp(buffer_.data() + end_ - kMarkSize, eof_mark_.data(), kMarkSize) == 0;
    }
    const size_t available = framing_ == Framing::kEofMarked
                                 ? (buffered() > kMarkSize ? buffered() - kMarkSize : 0)
                                 : static_cast<size_t>(std::min<int64_t>(
                                       static_cast<int64_t>(buffered()), length_left_));
    if (available > 0) {
      const size_t n = std::min(available, max);
      std::memcpy(buffer, buffer_.data() + begin_, n);
      begin_ += n;
      rdb_bytes_read_ += static_cast<int64_t>(n);
      if (framing_ == Framing::kLength) length_left_ -= static_cast<int64_t>(n);
      return n;
    }
    if ((framing_ == Framing::kEofMarked && mark_received_) ||
        (framing_ == Framing::kLength && length_left_ == 0)) {
      done_ = true;
      Close();
      return 0;
    }
    absl::Status received = Receive(absl::Now() + timeout_, "more of the RDB");
    if (!received.ok()) return stalled(std::move(received));
  }
}

}  // namespace codeco::checkpointer
