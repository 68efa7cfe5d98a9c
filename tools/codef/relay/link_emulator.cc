#include "tools/codef/relay/link_emulator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <list>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/clock.h"
#include "codeco/common/logging.h"
#include "codeco/common/status.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24  // Linux 4.2+; older glibc headers lack it
#endif

namespace codeco::codef {
namespace {

constexpr size_t kMaxRequestHeadBytes = 8192;
// How often a stalled CONNECT checks whether its client gave up.
constexpr absl::Duration kStallCheckInterval = absl::Milliseconds(200);
// How often the accept loop joins finished connections when idle.
constexpr int kReapIntervalMs = 1000;
// How long the accept loop waits after running out of descriptors.
constexpr int kAcceptBackoffMs = 100;

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Best effort: moves the calling thread to SCHED_FIFO when `enabled`.
void MaybeRaisePriority(bool enabled) {
  if (!enabled) return;
  sched_param param{};
  param.sched_priority = 10;
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// "a.b.c.d:port" -> sockaddr_in; errors name `field`.
absl::StatusOr<sockaddr_in> ParseIpv4HostPort(const std::string& host_port,
                                              const std::string& field) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return InvalidFieldError(field, absl::StrCat("want IPv4 host:port, got ", host_port));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const std::string host = host_port.substr(0, colon);
  int port = 0;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      !absl::SimpleAtoi(std::string(host_port.substr(colon + 1)), &port) || port < 0 ||
      port > 65535) {
    return InvalidFieldError(field, absl::StrCat("want IPv4 host:port, got ", host_port));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// The destination of "CONNECT host:port HTTP/1.x".
struct ConnectTarget {
  std::string host;
  std::string host_port;
};

std::optional<ConnectTarget> ParseConnect(std::string_view head) {
  const size_t line_end = head.find("\r\n");
  std::vector<std::string> parts =
      absl::StrSplit(std::string(head.substr(0, line_end)), ' ', absl::SkipEmpty());
  if (parts.size() != 3 || parts[0] != "CONNECT" || parts[2].rfind("HTTP/1.", 0) != 0) {
    return std::nullopt;
  }
  const size_t colon = parts[1].rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  return ConnectTarget{parts[1].substr(0, colon), parts[1]};
}

// Counters shared by a relay and its connections.
struct RelayCounters {
  std::atomic<int64_t> tunnels_opened{0};
  std::atomic<int64_t> requests_refused{0};
  std::atomic<int64_t> channel_tunnels_opened{0};
  std::atomic<int64_t> channels_refused{0};
};

// True when `host` is an IPv4 address (not a channel endpoint's name).
bool IsIpv4(const std::string& host) {
  in_addr parsed;
  return inet_pton(AF_INET, host.c_str(), &parsed) == 1;
}

// One client connection to a relay: the CONNECT handshake, then two shaped
// directions, each with a reader thread (socket -> pipe) and a writer thread
// (pipe -> socket at the release times).
class Connection {
 public:
  Connection(int client_fd, std::string cluster, const LinkTable& links,
             const LinkEmulatorOptions& options, uint64_t seed, RelayCounters& counters)
      : client_fd_(client_fd),
        cluster_(std::move(cluster)),
        links_(links),
        options_(options),
        seed_(seed),
        counters_(counters) {}

  ~Connection() {
    close(client_fd_);
    if (upstream_fd_ >= 0) close(upstream_fd_);
    if (endpoint_fd_ >= 0) close(endpoint_fd_);
  }

  // Starts the handshake thread.
  void Start() {
    live_threads_ = 1;
    run_thread_ = std::thread([this] { Run(); });
  }

  // Unblocks every thread of the connection; they exit soon after.
  void Stop() {
    stopping_ = true;
    {
      absl::MutexLock lock(&mu_);
      shutdown(client_fd_, SHUT_RDWR);
      if (upstream_fd_ >= 0) shutdown(upstream_fd_, SHUT_RDWR);
      if (endpoint_fd_ >= 0) shutdown(endpoint_fd_, SHUT_RDWR);
      cv_.SignalAll();
    }
    WakeDirections();
  }

  // Conditions changed: re-evaluate waits.
  void Wake() {
    {
      absl::MutexLock lock(&mu_);
      cv_.SignalAll();
    }
    WakeDirections();
  }

  // Joins every thread (after Stop, or once finished()).
  void Join() {
    if (run_thread_.joinable()) run_thread_.join();
    if (echo_thread_.joinable()) echo_thread_.join();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  // True once every thread has exited.
  bool finished() const { return live_threads_.load() == 0; }

 private:
  struct Direction {
    int src_fd = -1;
    int dst_fd = -1;
    absl::Mutex mu;
    absl::CondVar cv;
    std::unique_ptr<ShapedPipe> pipe ABSL_GUARDED_BY(mu);
  };

  void WakeDirections() {
    for (Direction* d : {&up_, &down_}) {
      absl::MutexLock lock(&d->mu);
      d->cv.SignalAll();
    }
  }

  void Refuse(const char* status_line) {
    counters_.requests_refused++;
    const std::string answer = absl::StrCat("HTTP/1.1 ", status_line,
                                            "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    SendAll(client_fd_, answer.data(), answer.size());
  }

  // True when the client closed its side (checked without blocking).
  bool ClientGone() {
    pollfd pfd{client_fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char byte;
    return recv(client_fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

  // Reads and answers the CONNECT request; false when the tunnel is not
  // opened (the answer, if any, has been sent).
  bool Handshake(std::string* destination_cluster, std::string* leftover) {
    std::string head;
    const absl::Time deadline = absl::Now() + options_.handshake_timeout;
    char buf[4096];
    size_t end;
    while ((end = head.find("\r\n\r\n")) == std::string::npos) {
      if (head.size() > kMaxRequestHeadBytes) {
        Refuse("431 Request Header Fields Too Large");
        return false;
      }
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration() || stopping_) return false;
      pollfd pfd{client_fd_, POLLIN, 0};
      timespec timeout = absl::ToTimespec(left);
      int ready = ppoll(&pfd, 1, &timeout, nullptr);
      if (ready < 0 && errno != EINTR) return false;
      if (ready <= 0) continue;
      ssize_t n = recv(client_fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      head.append(buf, static_cast<size_t>(n));
    }
    *leftover = head.substr(end + 4);
    head.resize(end + 4);

    std::optional<ConnectTarget> target = ParseConnect(head);
    if (!target.has_value()) {
      Refuse("400 Bad Request");
      return false;
    }
    std::optional<std::string> destination = links_.ClusterForIp(target->host);
    // A name, not a service address: a channel endpoint ("<pod>.<cluster>:<port>"),
    // which only a virtual link from this cluster lets through.
    const bool channel = !IsIpv4(target->host);
    if (channel) {
      destination = links_.ChannelDestination(cluster_, target->host_port);
      if (!destination.has_value()) {
        counters_.channels_refused++;
        log::Info("relay: refused channel traffic without a virtual link",
                  {{"cluster", cluster_}, {"target", target->host_port}});
        Refuse("403 Forbidden");
        return false;
      }
    }
    absl::StatusOr<sockaddr_in> addr = channel ? absl::StatusOr<sockaddr_in>(sockaddr_in{})
                                               : ParseIpv4HostPort(target->host_port, "connect");
    if (!destination.has_value() || !addr.ok()) {
      log::Debug("relay: refused CONNECT to an unknown destination",
                 {{"cluster", cluster_}, {"target", target->host_port}});
      Refuse("403 Forbidden");
      return false;
    }
    *destination_cluster = *destination;

    // A cut link or a partition: the CONNECT stalls until healed (like SYNs
    // lost on the way), or until the client gives up.
    absl::StatusOr<PathState> path;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        path = links_.Path(cluster_, *destination);
        if (!path.ok()) break;
        if (!path->forward.cut) break;
        if (stopping_) return false;
        mu_.Unlock();
        const bool gone = ClientGone();
        mu_.Lock();
        if (gone) return false;
        cv_.WaitWithTimeout(&mu_, kStallCheckInterval);
      }
    }
    if (!path.ok()) {
      Refuse("403 Forbidden");
      return false;
    }

    if (channel) {
      // CODEF's pods run no processes: the channel's receiving endpoint is
      // emulated by an echo at the far end of the shaped path, so what the
      // sender gets back crossed the link both ways.
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        Refuse("502 Bad Gateway");
        return false;
      }
      {
        absl::MutexLock lock(&mu_);
        upstream_fd_ = pair[0];
        endpoint_fd_ = pair[1];
      }
      live_threads_++;
      echo_thread_ = std::thread([this] { EchoLoop(); });
      counters_.channel_tunnels_opened++;
    } else if (!ConnectUpstream(*addr)) {
      Refuse("502 Bad Gateway");
      return false;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
      // The TCP handshake to the destination costs one emulated round trip.
      const absl::Time ready = absl::Now() + absl::Nanoseconds(path->forward.one_way_latency_ns +
                                                               path->reverse_latency_ns);
      while (!stopping_ && absl::Now() < ready) cv_.WaitWithDeadline(&mu_, ready);
      if (stopping_) return false;
    }
    static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
    return SendAll(client_fd_, kEstablished.data(), kEstablished.size());
  }

  // Connects to a service address from the source cluster's address.
  bool ConnectUpstream(const sockaddr_in& addr) {
    // The destination sees the source cluster's service address as the peer.
    sockaddr_in source{};
    source.sin_family = AF_INET;
    inet_pton(AF_INET, links_.ServiceIp(cluster_).value_or("0.0.0.0").c_str(), &source.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;  // pick the port at connect time, per destination
    if (fd >= 0) setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&source), sizeof source) != 0 ||
        connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      if (fd >= 0) close(fd);
      return false;
    }
    SetNoDelay(fd);
    absl::MutexLock lock(&mu_);
    upstream_fd_ = fd;
    return true;
  }

  // The emulated channel endpoint: sends back what it receives, until EOF.
  void EchoLoop() {
    char buf[16 * 1024];
    while (!stopping_) {
      ssize_t n = recv(endpoint_fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!SendAll(endpoint_fd_, buf, static_cast<size_t>(n))) break;
    }
    shutdown(endpoint_fd_, SHUT_WR);
    live_threads_--;
  }

  void Run() {
    std::string destination;
    std::string leftover;
    if (!Handshake(&destination, &leftover)) {
      shutdown(client_fd_, SHUT_RDWR);
      if (endpoint_fd_ >= 0) shutdown(endpoint_fd_, SHUT_RDWR);  // ends the echo
      live_threads_--;
      return;
    }
    counters_.tunnels_opened++;
    Clock& clock = RealClock::Default();
    up_.src_fd = client_fd_;
    up_.dst_fd = upstream_fd_;
    down_.src_fd = upstream_fd_;
    down_.dst_fd = client_fd_;
    {
      absl::MutexLock lock(&up_.mu);
      up_.pipe = std::make_unique<ShapedPipe>(links_, cluster_, destination, clock, Mix(seed_ * 2),
                                              options_.shaping);
      if (!leftover.empty()) up_.pipe->Push(std::move(leftover));
    }
    {
      absl::MutexLock lock(&down_.mu);
      down_.pipe = std::make_unique<ShapedPipe>(links_, destination, cluster_, clock,
                                                Mix(seed_ * 2 + 1), options_.shaping);
    }
    live_threads_ += 3;
    threads_.emplace_back([this] { WriteLoop(up_); });
    threads_.emplace_back([this] { ReadLoop(down_); });
    threads_.emplace_back([this] { WriteLoop(down_); });
    ReadLoop(up_);
  }

  // Socket -> pipe; exits the thread (and counts it out) when done.
  void ReadLoop(Direction& d) {
    MaybeRaisePriority(options_.realtime_priority);
    std::string buf(static_cast<size_t>(options_.read_chunk_bytes), '\0');
    while (!stopping_) {
      ssize_t n = recv(d.src_fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {  // reset: tear the whole tunnel down
        Stop();
        break;
      }
      absl::MutexLock lock(&d.mu);
      if (n == 0) {
        d.pipe->PushEndOfStream();
        d.cv.SignalAll();
        break;
      }
      d.pipe->Push(std::string(buf.data(), static_cast<size_t>(n)));
      d.cv.SignalAll();
      while (!stopping_ && d.pipe->buffered_bytes() >= options_.max_buffered_bytes) {
        d.cv.Wait(&d.mu);
      }
    }
    live_threads_--;
  }

  // Pipe -> socket at each chunk's release time.
  void WriteLoop(Direction& d) {
    MaybeRaisePriority(options_.realtime_priority);
    // Wake at the release time, not up to 50 us later (the default slack).
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    while (true) {
      std::vector<Chunk> chunks;
      {
        absl::MutexLock lock(&d.mu);
        while (true) {
          if (stopping_) {
            live_threads_--;
            return;
          }
          chunks = d.pipe->PopDue();
          if (!chunks.empty()) break;
          const absl::Time next = d.pipe->NextRelease();
          if (next == absl::InfiniteFuture()) {
            d.cv.Wait(&d.mu);
          } else {
            d.cv.WaitWithDeadline(&d.mu, next);
          }
        }
        d.cv.SignalAll();  // room for the reader
      }
      for (const Chunk& chunk : chunks) {
        if (chunk.end_of_stream) {
          shutdown(d.dst_fd, SHUT_WR);
          live_threads_--;
          return;
        }
        if (!SendAll(d.dst_fd, chunk.data.data(), chunk.data.size())) {
          Stop();
          live_threads_--;
          return;
        }
      }
    }
  }

  const int client_fd_;
  const std::string cluster_;
  const LinkTable& links_;
  const LinkEmulatorOptions& options_;
  const uint64_t seed_;
  RelayCounters& counters_;

  absl::Mutex mu_;  // guards upstream_fd_ changes and the handshake waits
  absl::CondVar cv_;
  int upstream_fd_ = -1;  // written once by the handshake, under mu_
  int endpoint_fd_ = -1;  // a channel tunnel's emulated endpoint (the echo's end)
  std::thread echo_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> live_threads_{0};
  std::thread run_thread_;
  std::vector<std::thread> threads_;  // started by run_thread_; joined after it
  Direction up_;                      // client -> destination
  Direction down_;                    // destination -> client
};

}  // namespace

// One cluster's egress relay: an accept loop and its open connections.
class LinkEmulator::Relay {
 public:
  Relay(std::string cluster, int listen_fd, const LinkTable& links,
        const LinkEmulatorOptions& options)
      : cluster_(std::move(cluster)),
        listen_fd_(listen_fd),
        wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        links_(links),
        options_(options) {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~Relay() {
    Shutdown();
    close(listen_fd_);
    close(wake_fd_);
  }

  void Shutdown() {
    if (stopping_.exchange(true)) return;
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    accept_thread_.join();
    std::list<std::unique_ptr<Connection>> connections;
    {
      absl::MutexLock lock(&mu_);
      connections.swap(connections_);
    }
    for (auto& connection : connections) connection->Stop();
    for (auto& connection : connections) connection->Join();
  }

  void WakeAll() {
    absl::MutexLock lock(&mu_);
    for (auto& connection : connections_) connection->Wake();
  }

  RelayStats Stats() {
    RelayStats stats;
    stats.tunnels_opened = counters_.tunnels_opened.load();
    stats.requests_refused = counters_.requests_refused.load();
    stats.channel_tunnels_opened = counters_.channel_tunnels_opened.load();
    stats.channels_refused = counters_.channels_refused.load();
    absl::MutexLock lock(&mu_);
    for (auto& connection : connections_) stats.open_connections += !connection->finished();
    return stats;
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      int ready = poll(fds, 2, kReapIntervalMs);
      {
        absl::MutexLock lock(&mu_);
        ReapLocked();
      }
      if (ready <= 0 || stopping_ || (fds[0].revents & POLLIN) == 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors or memory: back off instead of spinning on the
          // still-pending connection (Shutdown's wake ends the wait early).
          log::Warn("relay: accept failed", {{"cluster", cluster_}, {"error", std::strerror(errno)}});
          pollfd wake{wake_fd_, POLLIN, 0};
          poll(&wake, 1, kAcceptBackoffMs);
        }
        continue;
      }
      SetNoDelay(fd);
      absl::MutexLock lock(&mu_);
      auto connection = std::make_unique<Connection>(
          fd, cluster_, links_, options_,
          Mix(options_.seed ^ Mix(next_id_++) ^ std::hash<std::string>()(cluster_)), counters_);
      connection->Start();
      connections_.push_back(std::move(connection));
    }
  }

  // Joins and drops connections whose threads have all exited.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->finished()) {
        (*it)->Join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const std::string cluster_;
  const int listen_fd_;
  const int wake_fd_;
  const LinkTable& links_;
  const LinkEmulatorOptions& options_;
  RelayCounters counters_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  absl::Mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

LinkEmulator::LinkEmulator() : LinkEmulator(LinkEmulatorOptions{}) {}

LinkEmulator::LinkEmulator(const LinkEmulatorOptions& options) : options_(options) {}

LinkEmulator::~LinkEmulator() { Shutdown(); }

absl::StatusOr<std::string> LinkEmulator::AddCluster(const std::string& name,
                                                     const std::string& service_ip,
                                                     const std::string& relay_listen) {
  ASSIGN_OR_RETURN(sockaddr_in listen_addr, ParseIpv4HostPort(relay_listen, "relay_listen"));
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::FailedPreconditionError("the link emulator is shut down");
  if (links_.HasCluster(name)) {
    return absl::AlreadyExistsError(absl::StrCat("cluster ", name, " is already registered"));
  }
  if (links_.ClusterForIp(service_ip).has_value()) {
    return absl::AlreadyExistsError(absl::StrCat("service_ip ", service_ip, " is taken"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof listen_addr;
  if (bind(fd, reinterpret_cast<const sockaddr*>(&listen_addr), sizeof listen_addr) != 0 ||
      listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&listen_addr), &len) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("relay_listen: cannot listen on ", relay_listen, ": ", error));
  }
  if (absl::Status added = links_.AddCluster(name, service_ip); !added.ok()) {
    close(fd);
    return added;
  }
  const std::string address = absl::StrCat(relay_listen.substr(0, relay_listen.rfind(':')), ":",
                                           ntohs(listen_addr.sin_port));
  relays_[name] = std::make_unique<Relay>(name, fd, links_, options_);
  relay_addresses_[name] = address;
  return address;
}

absl::Status LinkEmulator::SetLink(const std::string& from, const std::string& to,
                                   const LinkConditions& conditions) {
  RETURN_IF_ERROR(links_.SetLink(from, to, conditions));
  WakeAll();
  return absl::OkStatus();
}

absl::StatusOr<LinkConditions> LinkEmulator::GetLink(const std::string& from,
                                                     const std::string& to) const {
  return links_.GetLink(from, to);
}

absl::Status LinkEmulator::SetPartitioned(const std::string& cluster, bool partitioned) {
  RETURN_IF_ERROR(links_.SetPartitioned(cluster, partitioned));
  WakeAll();
  return absl::OkStatus();
}

absl::Status LinkEmulator::PutVirtualLink(const VirtualLinkRoute& route) {
  return links_.PutVirtualLink(route);
}

absl::Status LinkEmulator::DeleteVirtualLink(const std::string& id) {
  return links_.DeleteVirtualLink(id);
}

std::map<std::string, VirtualLinkRoute> LinkEmulator::VirtualLinks() const {
  return links_.VirtualLinks();
}

absl::StatusOr<std::string> LinkEmulator::RelayAddress(const std::string& cluster) const {
  absl::MutexLock lock(&mu_);
  auto it = relay_addresses_.find(cluster);
  if (it == relay_addresses_.end())
    return absl::NotFoundError(absl::StrCat("no cluster ", cluster));
  return it->second;
}

absl::StatusOr<RelayStats> LinkEmulator::Stats(const std::string& cluster) const {
  absl::MutexLock lock(&mu_);
  auto it = relays_.find(cluster);
  if (it == relays_.end()) return absl::NotFoundError(absl::StrCat("no cluster ", cluster));
  return it->second->Stats();
}

void LinkEmulator::WakeAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [name, relay] : relays_) relay->WakeAll();
}

void LinkEmulator::Shutdown() {
  std::map<std::string, std::unique_ptr<Relay>> relays;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    relays.swap(relays_);
  }
  for (auto& [name, relay] : relays) relay->Shutdown();
  relays.clear();
}

}  // namespace codeco::codef
