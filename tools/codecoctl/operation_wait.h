#pragma once
// Following a long-running operation to its end, for every command that
// waits on one (apply --wait, get operation --wait, migrate): one line that
// updates in place on a terminal, a line per change otherwise.

#include <unistd.h>

#include <functional>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli.h"
#include "codeco/common/v1/operation.pb.h"

namespace codeco::ctl {

/// How WaitForOperation shows and bounds its wait.
struct OperationWait {
  /// One state as a line (a state whose line did not change is not shown again).
  std::function<std::string(const common::v1::Operation&)> line = OperationLine;
  /// How long the stream may stay open (--timeout overrides it).
  absl::Duration timeout = absl::Minutes(10);
  /// Put before "lost operation …" when the stream breaks (the flag that asked to wait).
  std::string lost_prefix = "--wait: ";
  /// Receives the last state seen, when set.
  common::v1::Operation* last = nullptr;
};

/// Follows operation `first` with WatchOperation of `stub` (WatchRequest and
/// WatchResponse are that service's) until it is done, as `wait` says.
/// 0 when it succeeded; 1 (the error on stderr, as `command`) when it failed
/// or the stream broke.
template <typename WatchRequest, typename WatchResponse, typename Stub>
int WaitForOperation(Stub& stub, const common::v1::Operation& first, const Args& args,
                     const std::string& command, const OperationWait& wait = {}) {
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  std::string shown;
  auto show = [&](const common::v1::Operation& op) {
    std::string text = wait.line(op);
    if (text == shown) return;
    shown = std::move(text);
    std::cout << (tty ? "\r\033[K" : "") << shown << (tty ? "" : "\n") << std::flush;
  };
  common::v1::Operation current = first;
  show(current);
  if (!current.done()) {
    auto context = ContextWithTimeout(args, wait.timeout);
    WatchRequest request;
    request.set_id(first.id());
    auto stream = stub.WatchOperation(context.get(), request);
    WatchResponse event;
    while (stream->Read(&event)) {
      current = event.operation();
      show(current);
    }
    grpc::Status status = stream->Finish();
    if (tty) std::cout << "\n";
    if (!current.done()) {
      return Fail(command, absl::StrCat(wait.lost_prefix, "lost operation ", first.id(), " before it was done (",
                                        status.error_message(), ")"));
    }
  } else if (tty) {
    std::cout << "\n";
  }
  if (wait.last != nullptr) *wait.last = current;
  if (current.has_error() && current.error().code() != common::v1::ERROR_CODE_UNSPECIFIED) {
    return Fail(command,
                absl::StrCat("operation ", current.id(), " failed: ", current.error().message()));
  }
  return 0;
}

}  // namespace codeco::ctl
