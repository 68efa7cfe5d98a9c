#include "pdlc/core/lstm_forecaster.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/optim/adam.h>

#include "absl/strings/str_cat.h"

namespace codeco::pdlc {
namespace {

// Features per window step from one series; twice that with neighbours.
constexpr int kSeriesFeatures = 4;
// Log-ratio targets: CPU horizons, then memory horizons.
constexpr int kTargets = 2 * static_cast<int>(kHorizonCount);
// The head predicts each target's location and its log-scale.
constexpr int kOutputs = 2 * kTargets;
// Log-scales are kept in this range so one odd batch cannot blow the loss up.
constexpr double kMinLogScale = -7, kMaxLogScale = 2;
// Writes series `s`'s part of the window ending before `end`: for each step,
// kSeriesFeatures floats at out + step * stride.
void WriteSeriesFeatures(const UsageSeries& s, size_t end, size_t window, size_t stride,
                         float* out) {
  const double cpu_last = LogLevel(s.cpu_percent[end - 1]);
  const double mem_last = LogLevel(s.mem_percent[end - 1]);
  for (size_t k = 0; k < window; ++k) {
    const size_t at = end - window + k;
    out[k * stride + 0] = static_cast<float>(s.cpu_percent[at] / 100.0);
    out[k * stride + 1] = static_cast<float>(s.mem_percent[at] / 100.0);
    out[k * stride + 2] = static_cast<float>(LogLevel(s.cpu_percent[at]) - cpu_last);
    out[k * stride + 3] = static_cast<float>(LogLevel(s.mem_percent[at]) - mem_last);
  }
}

// Writes the window of `origin` as window x `features` floats: the node's
// own features, then (features == 2 * kSeriesFeatures) its neighbours', the
// node's own standing in when the origin has none.
void WriteFeatures(const ForecastOrigin& origin, size_t window, int features, float* out) {
  WriteSeriesFeatures(*origin.series, origin.end, window, features, out);
  if (features > kSeriesFeatures) {
    const UsageSeries& around = origin.neighbors != nullptr ? *origin.neighbors : *origin.series;
    WriteSeriesFeatures(around, origin.end, window, features, out + kSeriesFeatures);
  }
}

// Writes the log-ratios to predict: CPU horizons, then memory horizons.
void WriteTargets(const UsageSeries& s, size_t end, float* out) {
  const double cpu_last = LogLevel(s.cpu_percent[end - 1]);
  const double mem_last = LogLevel(s.mem_percent[end - 1]);
  for (size_t h = 0; h < kHorizonCount; ++h) {
    const size_t at = end - 1 + kHorizonSteps[h];
    out[h] = static_cast<float>(LogLevel(s.cpu_percent[at]) - cpu_last);
    out[kHorizonCount + h] = static_cast<float>(LogLevel(s.mem_percent[at]) - mem_last);
  }
}

double FromLogRatio(double last_percent, float log_ratio) {
  return FromLogLevel(LogLevel(last_percent) + log_ratio);
}

}  // namespace

struct LstmForecaster::Model {
  explicit Model(const LstmOptions& o)
      : lstm(torch::nn::LSTMOptions(FeaturesOf(o), o.hidden_units)
                 .num_layers(o.layers)
                 .batch_first(true)),
        head(o.hidden_units, kTargets),
        spread_head(o.hidden_units, kTargets) {}

  // Locations then log-scales, kOutputs per row. The spread head reads the
  // LSTM's state without training it: the forecast alone shapes the LSTM.
  torch::Tensor Forward(const torch::Tensor& x) {
    auto sequence = std::get<0>(lstm->forward(x));
    const torch::Tensor last = sequence.select(1, sequence.size(1) - 1);
    return torch::cat({head->forward(last), spread_head->forward(last.detach())}, 1);
  }

  std::vector<torch::Tensor> Parameters() const {
    std::vector<torch::Tensor> all = lstm->parameters();
    for (auto& p : head->parameters()) all.push_back(p);
    for (auto& p : spread_head->parameters()) all.push_back(p);
    return all;
  }

  torch::nn::LSTM lstm;
  torch::nn::Linear head;
  torch::nn::Linear spread_head;
};

int LstmForecaster::FeaturesOf(const LstmOptions& options) {
  return options.read_neighbors ? 2 * kSeriesFeatures : kSeriesFeatures;
}

LstmForecaster::LstmForecaster(LstmOptions options) : options_(options) {
  options_.window = std::max<size_t>(options_.window, 2);
  options_.hidden_units = std::max(options_.hidden_units, 1);
  options_.layers = std::max(options_.layers, 1);
  options_.batch_size = std::max(options_.batch_size, 1);
  torch::set_num_threads(std::max(options_.threads, 1));
  torch::manual_seed(options_.seed);
  model_ = std::make_unique<Model>(options_);
}

LstmForecaster::~LstmForecaster() = default;

absl::Status LstmForecaster::Train(const std::vector<UsageSeries>& history) {
  const size_t window = options_.window;
  const int features = FeaturesOf(options_);
  // What each node's neighbours did, from the history itself.
  std::vector<UsageSeries> neighbors;
  if (options_.read_neighbors) neighbors = NeighborMeans(history);
  // Every origin with a full window behind it and every horizon ahead of it.
  std::vector<ForecastOrigin> origins;
  for (size_t i = 0; i < history.size(); ++i) {
    const UsageSeries& s = history[i];
    const UsageSeries* around = options_.read_neighbors ? &neighbors[i] : nullptr;
    for (size_t end = window; end + kMaxHorizonSteps - 1 < s.size(); ++end) {
      origins.push_back({&s, end, around});
    }
  }
  if (origins.size() < static_cast<size_t>(options_.batch_size)) {
    return absl::FailedPreconditionError(
        absl::StrCat("lstm: ", origins.size(), " training windows, need at least ", options_.batch_size,
                     " (series of at least ", window + kMaxHorizonSteps, " samples)"));
  }
  std::mt19937_64 rng(options_.seed);
  if (options_.max_training_windows > 0 && origins.size() > options_.max_training_windows) {
    std::shuffle(origins.begin(), origins.end(), rng);
    origins.resize(options_.max_training_windows);
  }
  const int64_t n = static_cast<int64_t>(origins.size());
  torch::Tensor inputs = torch::empty({n, static_cast<int64_t>(window), features}, torch::kFloat32);
  torch::Tensor targets = torch::empty({n, kTargets}, torch::kFloat32);
  float* in = inputs.data_ptr<float>();
  float* tg = targets.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    WriteFeatures(origins[i], window, features, in + i * window * features);
    WriteTargets(*origins[i].series, origins[i].end, tg + i * kTargets);
  }

  torch::manual_seed(options_.seed);
  model_->lstm->train();
  torch::optim::Adam optimizer(model_->Parameters(), torch::optim::AdamOptions(options_.learning_rate));
  const int64_t batch = options_.batch_size;
  double epoch_loss = 0;
  for (int epoch = 0; epoch < options_.epochs; ++epoch) {
    double rate = options_.learning_rate;
    if (epoch >= options_.epochs * 0.6) rate *= 0.5;
    if (epoch >= options_.epochs * 0.85) rate *= 0.5;
    for (auto& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(rate);
    }
    const torch::Tensor order = torch::randperm(n, torch::kInt64);
    double loss_sum = 0;
    int64_t batches = 0;
    for (int64_t start = 0; start < n; start += batch) {
      const torch::Tensor idx = order.slice(0, start, std::min(n, start + batch));
      optimizer.zero_grad();
      const torch::Tensor out = model_->Forward(inputs.index_select(0, idx));
      const torch::Tensor location = out.slice(1, 0, kTargets);
      const torch::Tensor log_scale = out.slice(1, kTargets, kOutputs).clamp(kMinLogScale, kMaxLogScale);
      const torch::Tensor target = targets.index_select(0, idx);
      // The location learns the median of the log-ratio (an absolute log error
      // is a relative error, as MAPE counts). The scale learns the spread
      // around it by a Laplace likelihood that leaves the location alone, so
      // uncertain windows do not weigh less in the forecast itself.
      torch::Tensor loss =
          (torch::exp((location - target).clamp(-5, 5)) - 1).abs().mean() +
          ((target - location.detach()).abs() * torch::exp(-log_scale) + log_scale).mean();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++batches;
    }
    epoch_loss = batches ? loss_sum / static_cast<double>(batches) : 0;
    if (!std::isfinite(epoch_loss)) {
      return absl::InternalError(absl::StrCat("lstm: training diverged in epoch ", epoch + 1));
    }
  }
  model_->lstm->eval();
  last_training_windows_ = static_cast<size_t>(n);
  last_training_loss_ = epoch_loss;
  return absl::OkStatus();
}

std::vector<UsageForecast> LstmForecaster::Predict(const std::vector<ForecastOrigin>& origins) const {
  std::vector<UsageForecast> out(origins.size());
  const size_t window = options_.window;
  const int features = FeaturesOf(options_);
  constexpr size_t kChunk = 4096;
  torch::NoGradGuard no_grad;
  for (size_t start = 0; start < origins.size(); start += kChunk) {
    const size_t count = std::min(kChunk, origins.size() - start);
    torch::Tensor inputs = torch::empty(
        {static_cast<int64_t>(count), static_cast<int64_t>(window), features}, torch::kFloat32);
    float* in = inputs.data_ptr<float>();
    for (size_t i = 0; i < count; ++i) {
      WriteFeatures(origins[start + i], window, features, in + i * window * features);
    }
    const torch::Tensor prediction = model_->Forward(inputs).contiguous();
    const float* p = prediction.data_ptr<float>();
    for (size_t i = 0; i < count; ++i) {
      const auto& o = origins[start + i];
      const double cpu_last = o.series->cpu_percent[o.end - 1];
      const double mem_last = o.series->mem_percent[o.end - 1];
      for (size_t h = 0; h < kHorizonCount; ++h) {
        const float* row = p + i * kOutputs;
        out[start + i].cpu_percent[h] = FromLogRatio(cpu_last, row[h]);
        out[start + i].mem_percent[h] = FromLogRatio(mem_last, row[kHorizonCount + h]);
        out[start + i].cpu_log_spread[h] =
            std::exp(std::clamp<double>(row[kTargets + h], kMinLogScale, kMaxLogScale));
        out[start + i].mem_log_spread[h] =
            std::exp(std::clamp<double>(row[kTargets + kHorizonCount + h], kMinLogScale, kMaxLogScale));
      }
    }
  }
  return out;
}

std::vector<float> LstmForecaster::Weights() const {
  std::vector<float> flat;
  for (const auto& p : model_->Parameters()) {
    const torch::Tensor c = p.detach().contiguous();
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return flat;
}

absl::Status LstmForecaster::SetWeights(const std::vector<float>& weights) {
  size_t expected = 0;
  for (const auto& p : model_->Parameters()) expected += static_cast<size_t>(p.numel());
  if (weights.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: ", weights.size(), " values, this model has ", expected));
  }
  for (const auto& w : weights) {
    if (!std::isfinite(w)) return absl::InvalidArgumentError("weights: not finite");
  }
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (auto& p : model_->Parameters()) {
    const int64_t count = p.numel();
    p.copy_(torch::from_blob(const_cast<float*>(weights.data() + offset), p.sizes(), torch::kFloat32));
    offset += static_cast<size_t>(count);
  }
  return absl::OkStatus();
}

}  // namespace codeco::pdlc
