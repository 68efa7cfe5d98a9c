#pragma once
// Which peer NSM probes next, and how. Each peer is probed once per interval;
// peers are spread evenly over the interval so probes do not burst; every
// `bulk_every`-th probe of a peer carries a bounded bulk sample for
// throughput. Driven entirely by the time passed in: no clock of its own.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::netma {

/// A NetMA peer to probe.
struct Peer {
  /// The peer's cluster name.
  std::string cluster;
  /// The peer NetMA's gRPC address, host:port.
  std::string address;
};

/// How often and how hard to probe.
struct ProbeSchedulerOptions {
  /// Time between two probes of the same peer. Default 5 s.
  absl::Duration interval = absl::Seconds(5);
  /// Every n-th probe of a peer includes a bulk sample (1 = every probe). Default 6.
  int bulk_every = 6;
  /// Size of one bulk sample, bytes. Default 64 KiB.
  int64_t bulk_bytes = 64 * 1024;
  /// Upper bound on bulk_bytes, bytes. Default 1 MiB.
  int64_t max_bulk_bytes = 1024 * 1024;
  /// Deadline of one probe. Default 2 s.
  absl::Duration timeout = absl::Seconds(2);
};

/// INVALID_ARGUMENT naming the field when `options` is unusable.
absl::Status ValidateProbeSchedulerOptions(const ProbeSchedulerOptions& options);

/// One probe to run.
struct ProbeTask {
  /// Peer to probe.
  Peer peer;
  /// Bytes of bulk sample to move (0: RTT only).
  int64_t bulk_bytes = 0;
  /// Deadline of the probe, relative to its start.
  absl::Duration timeout;
};

/// The port that measures one sample against a peer. The real one calls the
/// peer NetMA over gRPC; tests use a scripted double.
class Prober {
 public:
  virtual ~Prober() = default;
  /// Runs `task`. OK: rtt, and for a bulk task the bytes moved and the time it
  /// took. An error status means the probe failed (counts as loss).
  struct Result {
    /// Round-trip time of the RTT probe.
    absl::Duration rtt;
    /// Bulk bytes moved (0 for RTT-only).
    int64_t bulk_bytes = 0;
    /// Time the bulk transfer took.
    absl::Duration bulk_duration;
    /// Bytes put on the wire by the whole probe (requests and responses).
    int64_t wire_bytes = 0;
  };
  /// Measures one sample; may block up to task.timeout. Called from several
  /// threads at once (NetmaServer probes its peers in parallel), so an
  /// implementation must be thread-safe.
  virtual absl::StatusOr<Result> Probe(const ProbeTask& task) = 0;
  /// One round trip of the same call to this NetMA itself, without any
  /// network path: the overhead every sample carries. UNIMPLEMENTED when the
  /// prober cannot reach itself (then nothing is subtracted).
  virtual absl::StatusOr<absl::Duration> ProbeSelf(absl::Duration timeout) {
    return absl::UnimplementedError("this prober does not probe itself");
  }
};

/// Decides which peer is due. Not thread-safe.
class ProbeScheduler {
 public:
  /// A scheduler with no peers; `options` must be valid.
  explicit ProbeScheduler(const ProbeSchedulerOptions& options) : options_(options) {}

  /// Replaces the peer set at `now`. Kept peers keep their schedule; new
  /// peers are spread over the next interval in name order.
  void SetPeers(const std::vector<Peer>& peers, absl::Time now);
  /// The probes due at `now`, earliest first; each is scheduled again one
  /// interval after its due time (never in the past of `now`).
  std::vector<ProbeTask> TakeDue(absl::Time now);
  /// When the next probe is due (InfiniteFuture with no peers).
  absl::Time NextDue() const;
  /// The current peers, by cluster.
  std::vector<Peer> peers() const;
  /// The options in use.
  const ProbeSchedulerOptions& options() const { return options_; }

 private:
  struct Entry {
    Peer peer;
    absl::Time due;
    int64_t probes = 0;
  };
  ProbeSchedulerOptions options_;
  std::map<std::string, Entry> entries_;
};

}  // namespace codeco::netma
