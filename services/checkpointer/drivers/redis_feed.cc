#include "checkpointer/drivers/redis_feed.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <random>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpointer/drivers/socket_wait.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "codeco/common/status.h"

namespace codeco::checkpointer {
namespace {

// Longest command or argument the handshake accepts (a replica's are a few
// dozen bytes).
constexpr size_t kMaxHandshakeBytes = 64 << 10;

// `n` random characters of [0-9a-f] (a replication id, an EOF mark).
std::string RandomHex(size_t n) {
  std::random_device random;
  std::uniform_int_distribution<int> digit(0, 15);
  std::string out(n, '0');
  for (char& c : out) c = "0123456789abcdef"[digit(random)];
  return out;
}

// Takes the next command off the front of `input`: its arguments (none for
// an empty inline line), nullopt while it is incomplete. RESP arrays of
// bulk strings and inline commands, as a Redis server reads them.
absl::StatusOr<std::optional<std::vector<std::string>>> TakeCommand(std::string& input) {
  if (input.empty()) return std::nullopt;
  std::vector<std::string> args;
  if (input[0] != '*') {
    const size_t end = input.find('\n');
    if (end == std::string::npos) return std::nullopt;
    absl::string_view line(input.data(), end);
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
    args = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    input.erase(0, end + 1);
    return args;
  }
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("the replica broke the protocol: ", why));
  };
  size_t pos = 0;
  // The number in the line at `pos` after its one-character prefix.
  auto number = [&](int64_t* out) -> std::optional<bool> {
    const size_t end = input.find("\r\n", pos);
    if (end == std::string::npos) return std::nullopt;
    const bool ok = absl::SimpleAtoi(absl::string_view(input).substr(pos + 1, end - pos - 1), out);
    pos = end + 2;
    return ok;
  };
  int64_t count = 0;
  std::optional<bool> parsed = number(&count);
  if (!parsed) return std::nullopt;
  if (!*parsed || count < 0 || count > 1024) return bad("a bad array length");
  for (int64_t i = 0; i < count; ++i) {
    if (pos >= input.size()) return std::nullopt;
    if (input[pos] != '$') return bad("an array element that is not a bulk string");
    int64_t length = 0;
    parsed = number(&length);
    if (!parsed) return std::nullopt;
    if (!*parsed || length < 0 || length > static_cast<int64_t>(kMaxHandshakeBytes)) {
      return bad("a bad bulk string length");
    }
    if (input.size() < pos + length + 2) return std::nullopt;
    if (input.compare(pos + length, 2, "\r\n") != 0) return bad("a bulk string without CRLF");
    args.push_back(input.substr(pos, length));
    pos += length + 2;
  }
  input.erase(0, pos);
  return args;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisFeed>> RedisFeed::Listen(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("restore feed: cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = ErrnoText(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 4) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      const int port =
          ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      freeaddrinfo(found);
      auto feed = std::unique_ptr<RedisFeed>(new RedisFeed(fd, port));
      feed->password_ = RandomHex(40);
      return feed;
    }
    last_error = ErrnoText(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("restore feed: cannot listen on ", host, ": ", last_error));
}

RedisFeed::~RedisFeed() { Close(); }

void RedisFeed::Close() {
  if (replica_ >= 0) close(replica_);
  if (listener_ >= 0) close(listener_);
  replica_ = -1;
  listener_ = -1;
}

absl::Status RedisFeed::AcceptReplica(absl::Time deadline) {
  if (listener_ < 0) return absl::FailedPreconditionError("restore feed: closed");
  while (replica_ < 0) {
    RETURN_IF_ERROR(WaitFor(listener_, POLLIN, deadline, "the replica to connect"));
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      replica_ = fd;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return absl::UnavailableError(absl::StrCat("accepting the replica: ", ErrnoText(errno)));
    }
  }
  // The handshake is small requests and replies, the RDB big writes: no
  // reason to hold a reply back for Nagle.
  const int one = 1;
  setsockopt(replica_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char buffer[4096];
  for (bool resync = false;;) {
    absl::Status answered = Answer(&resync, deadline - absl::Now());
    if (absl::IsPermissionDenied(answered)) {
      // Not the replica this feed is for: drop it and wait for the next.
      close(replica_);
      replica_ = -1;
      input_.clear();
      eof_capable_ = false;
      authenticated_ = false;
      return AcceptReplica(deadline);
    }
    RETURN_IF_ERROR(answered);
    if (resync) return absl::OkStatus();
    if (input_.size() > kMaxHandshakeBytes) {
      return absl::InvalidArgumentError("the replica sent an oversized handshake command");
    }
    RETURN_IF_ERROR(WaitFor(replica_, POLLIN, deadline, "the replica's handshake"));
    const ssize_t n = recv(replica_, buffer, sizeof(buffer), 0);
    if (n > 0) {
      input_.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      return absl::UnavailableError("the replica hung up during its handshake");
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat("reading the replica's handshake: ", ErrnoText(errno)));
    }
  }
}

absl::Status RedisFeed::Answer(bool* resync, absl::Duration stall_timeout) {
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> command, TakeCommand(input_));
    if (!command.has_value()) return absl::OkStatus();
    if (command->empty()) continue;
    const std::string name = absl::AsciiStrToUpper((*command)[0]);
    if (name == "PING") {
      RETURN_IF_ERROR(SendAll("+PONG\r\n", stall_timeout));
    } else if (name == "REPLCONF") {
      // "REPLCONF capa eof capa psync2 ...": pairs of an option and its value.
      for (size_t i = 1; i + 1 < command->size(); i += 2) {
        if (absl::EqualsIgnoreCase((*command)[i], "capa") &&
            absl::EqualsIgnoreCase((*command)[i + 1], "eof")) {
          eof_capable_ = true;
        }
      }
      RETURN_IF_ERROR(SendAll("+OK\r\n", stall_timeout));
    } else if (name == "AUTH") {
      // "AUTH <password>" or "AUTH <user> <password>".
      authenticated_ = command->size() >= 2 && command->back() == password_;
      RETURN_IF_ERROR(SendAll(authenticated_ ? "+OK\r\n" : "-WRONGPASS invalid password\r\n",
                              stall_timeout));
    } else if (name == "PSYNC" || name == "SYNC") {
      if (!authenticated_) {
        SendAll("-NOAUTH Authentication required.\r\n", stall_timeout).IgnoreError();
        return absl::PermissionDeniedError("a connection asked for the RDB without the password");
      }
      // The RDB is sent as a diskless master sends it, between EOF marks,
      // which a replica takes only when it said so.
      if (!eof_capable_) {
        SendAll("-ERR this master sends only EOF-marked RDBs\r\n", stall_timeout).IgnoreError();
        return absl::FailedPreconditionError(
            "the replica cannot take an EOF-marked RDB (it did not send REPLCONF capa eof)");
      }
      // SYNC (the protocol before PSYNC) expects the RDB with no reply first.
      if (name == "PSYNC") {
        RETURN_IF_ERROR(
            SendAll(absl::StrCat("+FULLRESYNC ", RandomHex(40), " 0\r\n"), stall_timeout));
      }
      input_.clear();
      *resync = true;
      return absl::OkStatus();
    } else {
      RETURN_IF_ERROR(SendAll(
          absl::StrCat("-ERR unknown command '", name, "' (a restore feed)\r\n"), stall_timeout));
    }
  }
}

absl::Status RedisFeed::SendAll(absl::string_view bytes, absl::Duration stall_timeout) {
  if (replica_ < 0) return absl::FailedPreconditionError("restore feed: no replica");
  absl::Time stall_deadline = absl::Now() + stall_timeout;
  while (!bytes.empty()) {
    const ssize_t n = send(replica_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      stall_deadline = absl::Now() + stall_timeout;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitFor(replica_, POLLOUT, stall_deadline, "the replica to read more"));
    } else if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("the replica hung up: ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisFeed::BeginRdb(absl::Duration stall_timeout) {
  eof_mark_ = RandomHex(40);
  return SendAll(absl::StrCat("$EOF:", eof_mark_, "\r\n"), stall_timeout);
}

absl::Status RedisFeed::SendRdb(absl::string_view bytes, absl::Duration stall_timeout) {
  RETURN_IF_ERROR(SendAll(bytes, stall_timeout));
  rdb_bytes_sent_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status RedisFeed::EndRdb(absl::Duration stall_timeout) {
  return SendAll(eof_mark_, stall_timeout);
}

absl::Status RedisFeed::Drain(absl::Time deadline) {
  if (replica_ < 0) return absl::FailedPreconditionError("restore feed: no replica");
  char buffer[4096];
  for (;;) {
    absl::Status ready = WaitFor(replica_, POLLIN, deadline, "the replica");
    if (absl::IsDeadlineExceeded(ready)) return absl::OkStatus();
    RETURN_IF_ERROR(ready);
    const ssize_t n = recv(replica_, buffer, sizeof(buffer), 0);
    if (n == 0) return absl::UnavailableError("the replica hung up");
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("the replica hung up: ", ErrnoText(errno)));
    }
  }
}

}  // namespace codeco::checkpointer
