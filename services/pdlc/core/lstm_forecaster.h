#pragma once
// The LSTM usage forecaster (libtorch, CPU). Kept behind a plain header so
// only lstm_forecaster.cc pays for libtorch's headers.
//
// Each window step feeds the LSTM four features: CPU and memory as fractions
// of capacity, and the log-ratio of each to its latest value. The
// topology-aware variant (LstmOptions::read_neighbors) adds the same four of
// the mean of the node's neighbours (ForecastOrigin::neighbors): load that
// moves between a job's VMs or a cluster's nodes shows there first. The head reads
// the last hidden state and predicts, for both metrics and every horizon, the
// log-ratio of the future value to the latest one (trained on its absolute
// error: a log error is a relative error, as MAPE counts) and the scale of a
// Laplace distribution around it (trained on its likelihood, without moving
// the forecast), which breach advisories turn into a confidence.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pdlc/core/forecaster.h"

namespace codeco::pdlc {

/// How an LstmForecaster is shaped and trained.
struct LstmOptions {
  /// Samples per input window (the study used 10-12).
  size_t window = 12;
  /// LSTM hidden units.
  int hidden_units = 32;
  /// Stacked LSTM layers (two beat one by 3-4 % MAPE on the development traces).
  int layers = 2;
  /// Passes over the training windows.
  int epochs = 12;
  /// Windows per optimiser step.
  int batch_size = 256;
  /// Adam's initial learning rate; halved after 60 % and again after 85 % of the epochs.
  double learning_rate = 3e-3;
  /// At most this many training windows, drawn evenly at random (0 = all),
  /// which bounds training time on large histories.
  size_t max_training_windows = 200'000;
  /// Seed of weight initialisation and shuffling: the same data and seed give
  /// the same model.
  uint64_t seed = 1;
  /// Threads libtorch uses for its operators (process-wide setting).
  int threads = 1;
  /// The topology-aware variant: also reads the mean of the node's
  /// neighbours' series (training pairs each history series with its group's
  /// others, see NeighborMeans; Predict reads ForecastOrigin::neighbors).
  bool read_neighbors = false;
};

/// The LSTM forecaster. Predict may run on several threads at once; Train and
/// SetWeights may not run beside anything else.
class LstmForecaster : public UsageForecaster {
 public:
  /// A model shaped by `options`, with fresh weights.
  explicit LstmForecaster(LstmOptions options = {});
  ~LstmForecaster() override;
  LstmForecaster(const LstmForecaster&) = delete;
  LstmForecaster& operator=(const LstmForecaster&) = delete;

  std::string name() const override { return options_.read_neighbors ? "lstm-topology" : "lstm"; }
  size_t window() const override { return options_.window; }
  /// Trains from the current weights (fresh ones the first time; call again to
  /// fine-tune on newer data).
  absl::Status Train(const std::vector<UsageSeries>& history) override;
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override;

  /// Every parameter, flattened in a fixed order (what federated training sends).
  std::vector<float> Weights() const;
  /// Replaces every parameter; INVALID_ARGUMENT when the size does not match
  /// this shape's Weights().
  absl::Status SetWeights(const std::vector<float>& weights);
  /// Training windows the last Train used.
  size_t last_training_windows() const { return last_training_windows_; }
  /// Mean training loss of the last epoch of the last Train.
  double last_training_loss() const { return last_training_loss_; }

  /// The options.
  const LstmOptions& options() const { return options_; }
  /// Input features per window step of a model shaped by `options`.
  static int FeaturesOf(const LstmOptions& options);

 private:
  struct Model;
  LstmOptions options_;
  std::unique_ptr<Model> model_;
  size_t last_training_windows_ = 0;
  double last_training_loss_ = 0;
};

}  // namespace codeco::pdlc
