#include "codeco/common/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace codeco {
namespace {

// Binds a TCP socket to ip:port (0: any) and releases it; the bound port.
absl::StatusOr<int> BindAndRelease(const std::string& ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", ip));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot bind ", ip, ":", port));
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

absl::StatusOr<int> FreePort(const std::string& ip, int from) {
  if (from <= 0) return BindAndRelease(ip, 0);
  for (int port = from; port < from + 1000 && port < 65536; ++port) {
    absl::StatusOr<int> bound = BindAndRelease(ip, port);
    if (bound.ok()) return bound;
    if (bound.status().code() == absl::StatusCode::kInvalidArgument) return bound.status();
  }
  return absl::UnavailableError(absl::StrCat("no free port on ", ip, " in [", from, ", ",
                                             from + 1000, ")"));
}

}  // namespace codeco
