#pragma once
// The peer's side of PDLC's federated training: for one round, a fresh
// X25519 key pair, JoinRound at the neighborhood's aggregator, the spec from
// GetRound, the local model's weights masked (MakeMaskedUpdate) and
// submitted, seeds revealed for the peers that dropped, and the round's
// global model fetched and applied. Only the key, the masked vector, seeds,
// ids and counts leave the peer: the local model is read through a small
// WeightsSource port, so raw telemetry never reaches this code.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/pdlc/v1/federated_learning.grpc.pb.h"
#include "grpcpp/channel.h"
#include "pdlc/core/forecaster.h"

namespace codeco::pdlc {

/// What a peer contributes to a round.
struct LocalWeights {
  /// The local model's weights, flattened in a fixed order.
  std::vector<float> weights;
  /// Training samples behind them (the FedAvg weight), at least 1.
  uint64_t sample_count = 0;
};

/// The local model a peer trains federated (a port: the LSTM in production,
/// a plain vector in tests).
class WeightsSource {
 public:
  virtual ~WeightsSource() = default;
  /// The weights to contribute. FAILED_PRECONDITION when there is nothing to
  /// contribute (no local training since the last global model).
  virtual absl::StatusOr<LocalWeights> Snapshot() = 0;
  /// Replaces the local weights with round `round`'s global model.
  virtual absl::Status Apply(const std::vector<float>& weights, uint64_t round) = 0;
};

/// A UsageForecaster shared by the advisor (which owns and trains it) and a
/// federated peer (which reads and replaces its weights), taking turns under
/// a reader/writer lock: Train and Apply exclusive, Predict and Snapshot
/// shared. Samples count from the last Train and are reset by Apply, so a
/// peer contributes only fresh local training.
class SharedWeightsForecaster final : public UsageForecaster, public WeightsSource {
 public:
  /// Accessors of the wrapped model's weights and of the samples its last
  /// Train used.
  struct Access {
    /// The model's weights.
    std::function<std::vector<float>()> weights;
    /// Replaces the model's weights (INVALID_ARGUMENT for a wrong size).
    std::function<absl::Status(const std::vector<float>&)> set_weights;
    /// Samples (training windows) the last Train used.
    std::function<uint64_t()> trained_samples;
  };
  /// Wraps `model` (owned); `access` reaches into it.
  SharedWeightsForecaster(std::unique_ptr<UsageForecaster> model, Access access);

  std::string name() const override;
  size_t window() const override;
  absl::Status Train(const std::vector<UsageSeries>& history) override;
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override;
  absl::StatusOr<LocalWeights> Snapshot() override;
  absl::Status Apply(const std::vector<float>& weights, uint64_t round) override;

 private:
  mutable absl::Mutex mu_;
  std::unique_ptr<UsageForecaster> model_ ABSL_GUARDED_BY(mu_);
  const Access access_;
  uint64_t fresh_samples_ ABSL_GUARDED_BY(mu_) = 0;
};

/// How a peer takes part in rounds.
struct FederatedPeerOptions {
  /// This peer's id: its cluster name. Required.
  std::string peer_id;
  /// The model, as the aggregator serves it. Default: "lstm-cpu-mem".
  std::string model_name = "lstm-cpu-mem";
  /// The neighborhood. Required.
  std::string neighborhood;
  /// Between two GetRound polls while waiting for the round to move. Default: 1 s.
  absl::Duration poll_interval = absl::Seconds(1);
  /// Deadline of each call to the aggregator. Default: 10 s.
  absl::Duration call_timeout = absl::Seconds(10);
};

/// How one round ended for a peer.
struct PeerRoundResult {
  /// The round joined.
  uint64_t round = 0;
  /// Its final state as the peer saw it.
  v1::RoundState state = v1::ROUND_STATE_UNSPECIFIED;
  /// True when the round's global model was applied to the local model.
  bool applied = false;
  /// The clusters whose updates are in the global model (when applied).
  std::vector<std::string> contributors;
  /// Why the round was abandoned (the aggregator's reason).
  std::string abandon_reason;
};

/// One peer's client of the aggregator. RunRound may be called from one
/// thread at a time; Cancel from any.
class FederatedPeer {
 public:
  /// A peer calling the aggregator over `channel`, with its local model in
  /// `source` (not owned, outlives the peer).
  FederatedPeer(std::shared_ptr<grpc::Channel> channel, WeightsSource& source,
                FederatedPeerOptions options);

  /// Runs one round: joins the open round (waiting while another is in
  /// progress), submits, reveals, applies the global model. Returns when the
  /// round finished or was abandoned; DEADLINE_EXCEEDED at `deadline`,
  /// CANCELLED after Cancel, FAILED_PRECONDITION when the source has nothing
  /// to contribute, the aggregator's error otherwise.
  absl::StatusOr<PeerRoundResult> RunRound(absl::Time deadline);

  /// Ends a running RunRound (and every later one) at its next wait.
  void Cancel();

 private:
  // Waits poll_interval; false when cancelled or past `deadline`.
  bool Wait(absl::Time deadline);
  std::unique_ptr<grpc::ClientContext> Context(absl::Time deadline) const;
  // Polls GetRound until the round leaves `state`.
  absl::StatusOr<v1::Round> WaitWhile(uint64_t round, v1::RoundState state, absl::Time deadline);

  std::unique_ptr<v1::FederatedLearningService::Stub> stub_;
  WeightsSource& source_;
  const FederatedPeerOptions options_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

/// Runs a FederatedPeer's round every `interval` on a thread of its own,
/// until Stop. Rounds start at the multiples of `interval` since the Unix
/// epoch, so the peers of a neighborhood (clocks in sync within the join
/// window) join the same round; each round ends by the next start.
class FederatedPeerLoop {
 public:
  /// Starts the loop; the first round starts at the next multiple of `interval`.
  FederatedPeerLoop(std::unique_ptr<FederatedPeer> peer, absl::Duration interval);
  /// Stops.
  ~FederatedPeerLoop();
  /// Cancels the running round and joins the thread; idempotent.
  void Stop();

 private:
  void Run();

  std::unique_ptr<FederatedPeer> peer_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::pdlc
