#include "usage_profile.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "yaml_fields.h"

namespace codeco::codef {
namespace {

class ConstantProfile final : public UsageProfile {
 public:
  explicit ConstantProfile(Usage usage) : usage_(usage) {}
  Usage At(absl::Time, absl::Duration) const override { return usage_; }

 private:
  Usage usage_;
};

// A piecewise-constant series over the time since the pod started.
struct Point {
  int64_t offset_ns = 0;
  Usage usage;
};

class SeriesProfile final : public UsageProfile {
 public:
  SeriesProfile(std::vector<Point> points, bool loop) : points_(std::move(points)), loop_(loop) {
    if (points_.size() >= 2) {
      int64_t last_gap = points_.back().offset_ns - points_[points_.size() - 2].offset_ns;
      period_ns_ = points_.back().offset_ns + std::max<int64_t>(last_gap, 1);
    } else {
      period_ns_ = std::max<int64_t>(points_.back().offset_ns, 0) + 1'000'000'000;
    }
  }
  Usage At(absl::Time, absl::Duration elapsed) const override {
    int64_t t = absl::ToInt64Nanoseconds(elapsed);
    if (loop_ && t >= period_ns_) t %= period_ns_;
    Usage out = points_.front().usage;
    for (const Point& p : points_) {
      if (p.offset_ns > t) break;
      out = p.usage;
    }
    return out;
  }

 private:
  std::vector<Point> points_;
  bool loop_;
  int64_t period_ns_ = 0;
};

// A day-shaped cosine between min and max with its peak at `peak_at` into
// each period of wall time, plus reproducible noise.
class DiurnalProfile final : public UsageProfile {
 public:
  Usage At(absl::Time now, absl::Duration) const override {
    int64_t t = absl::ToUnixNanos(now);
    double phase = static_cast<double>(((t - peak_at_ns) % period_ns + period_ns) % period_ns) /
                   static_cast<double>(period_ns);
    double level = 0.5 + 0.5 * std::cos(2 * std::numbers::pi * phase);
    // Noise: one value per second, from a hash of (seed, pod, second).
    uint64_t h = absl::HashOf(seed, noise_key, t / 1'000'000'000);
    double u1 = static_cast<double>(h & 0xffffffff) / 4294967296.0;
    double u2 = static_cast<double>(h >> 32) / 4294967296.0;
    double factor = 1 + noise * (u1 + u2 - 1);  // triangular on [-noise, noise]
    auto mix = [&](int64_t lo, int64_t hi) {
      double v = (static_cast<double>(lo) + (static_cast<double>(hi - lo)) * level) * factor;
      return v <= 0 ? int64_t{0} : static_cast<int64_t>(std::llround(v));
    };
    return Usage{mix(min.cpu_millicores, max.cpu_millicores),
                 mix(min.memory_bytes, max.memory_bytes)};
  }

  Usage min;
  Usage max;
  int64_t period_ns = 86'400'000'000'000;
  int64_t peak_at_ns = 14 * 3'600'000'000'000;
  double noise = 0;
  int64_t seed = 0;
  std::string noise_key;
};

// Reads a cpu and memory pair from `map` at cpu_key / memory_key, defaulting to `fallback`.
Usage ReadUsage(MapReader& map, const std::string& cpu_key, const std::string& memory_key,
                const Usage& fallback, FieldErrors* errors) {
  Usage out = fallback;
  if (map.Has(cpu_key)) {
    ReadParsed(map.Get(cpu_key), map.PathOf(cpu_key), errors, ParseCpuMillicores,
               &out.cpu_millicores);
  }
  if (map.Has(memory_key)) {
    ReadParsed(map.Get(memory_key), map.PathOf(memory_key), errors, ParseBytes, &out.memory_bytes);
  }
  return out;
}

// One "offset,cpu,memory" row (memory optional: then it carries over).
bool ParsePointFields(const std::vector<std::string>& fields, const std::string& path,
                      const Usage& previous, FieldErrors* errors, Point* out) {
  if (fields.size() < 2 || fields.size() > 3) {
    errors->Add(path, "must be offset, cpu[, memory]");
    return false;
  }
  auto offset = ParseDurationNanos(fields[0]);
  auto cpu = ParseCpuMillicores(fields[1]);
  if (!offset.ok()) {
    errors->Add(path, absl::StrCat("offset: ", offset.status().message()));
    return false;
  }
  if (!cpu.ok()) {
    errors->Add(path, absl::StrCat("cpu: ", cpu.status().message()));
    return false;
  }
  out->offset_ns = *offset;
  out->usage = previous;
  out->usage.cpu_millicores = *cpu;
  if (fields.size() == 3) {
    auto memory = ParseBytes(fields[2]);
    if (!memory.ok()) {
      errors->Add(path, absl::StrCat("memory: ", memory.status().message()));
      return false;
    }
    out->usage.memory_bytes = *memory;
  }
  return true;
}

bool CheckSorted(const std::vector<Point>& points, const std::string& path, FieldErrors* errors) {
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].offset_ns <= points[i - 1].offset_ns) {
      errors->Add(IndexPath(path, i), "offsets must increase");
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<UsageProfile> MakeConstantProfile(Usage usage) {
  return std::make_unique<ConstantProfile>(usage);
}

namespace {

absl::StatusOr<std::unique_ptr<UsageProfile>> ParseUnguarded(const std::string& text,
                                                             const std::string& path,
                                                             const Usage& requests,
                                                             const std::string& noise_key,
                                                             const FileReader& read_file) {
  ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(text, path));
  FieldErrors errors;
  MapReader map(root, path, &errors);
  if (!map.valid()) {
    if (!root.IsMap()) return InvalidFieldError(path, "must be a mapping such as {type: constant}");
    return errors.ToStatus();
  }
  std::string type;
  if (!map.Has("type")) return InvalidFieldError(map.PathOf("type"), "is required");
  if (!ReadScalar(map.Get("type"), map.PathOf("type"), &errors, &type)) return errors.ToStatus();
  std::unique_ptr<UsageProfile> profile;
  if (type == "constant") {
    profile = MakeConstantProfile(ReadUsage(map, "cpu", "memory", requests, &errors));
  } else if (type == "step") {
    YAML::Node steps = map.Get("steps");
    std::vector<Point> points;
    if (!steps.IsSequence() || steps.size() == 0) {
      errors.Add(map.PathOf("steps"), "must be a non-empty list");
    } else {
      Usage previous = requests;
      for (size_t i = 0; i < steps.size(); ++i) {
        MapReader step(steps[i], IndexPath(map.PathOf("steps"), i), &errors);
        Point p;
        if (!step.Has("after")) {
          errors.Add(step.PathOf("after"), "is required");
        } else {
          ReadParsed(step.Get("after"), step.PathOf("after"), &errors, ParseDurationNanos,
                     &p.offset_ns);
        }
        p.usage = ReadUsage(step, "cpu", "memory", previous, &errors);
        previous = p.usage;
        step.Finish();
        points.push_back(p);
      }
      CheckSorted(points, map.PathOf("steps"), &errors);
    }
    if (errors.empty()) {
      // Before the first step the pod uses its requests.
      if (points.front().offset_ns > 0) points.insert(points.begin(), Point{0, requests});
      profile = std::make_unique<SeriesProfile>(std::move(points), false);
    }
  } else if (type == "diurnal") {
    auto diurnal = std::make_unique<DiurnalProfile>();
    diurnal->min = ReadUsage(map, "min_cpu", "min_memory", requests, &errors);
    diurnal->max = ReadUsage(map, "max_cpu", "max_memory", requests, &errors);
    if (map.Has("period") &&
        ReadParsed(map.Get("period"), map.PathOf("period"), &errors, ParseDurationNanos,
                   &diurnal->period_ns) &&
        diurnal->period_ns <= 0) {
      errors.Add(map.PathOf("period"), "must be > 0");
    }
    if (map.Has("peak_at")) {
      ReadParsed(map.Get("peak_at"), map.PathOf("peak_at"), &errors, ParseDurationNanos,
                 &diurnal->peak_at_ns);
    }
    if (map.Has("noise") &&
        ReadDouble(map.Get("noise"), map.PathOf("noise"), &errors, &diurnal->noise) &&
        (diurnal->noise < 0 || diurnal->noise > 1)) {
      errors.Add(map.PathOf("noise"), "must be between 0 and 1");
    }
    if (map.Has("seed")) ReadInt(map.Get("seed"), map.PathOf("seed"), &errors, &diurnal->seed);
    diurnal->noise_key = noise_key;
    profile = std::move(diurnal);
  } else if (type == "trace") {
    bool loop = false;
    if (map.Has("loop")) ReadBool(map.Get("loop"), map.PathOf("loop"), &errors, &loop);
    std::vector<Point> points;
    bool has_file = map.Has("file");
    bool has_points = map.Has("points");
    if (has_file == has_points) {
      errors.Add(map.PathOf("file"), "give exactly one of file or points");
    } else if (has_points) {
      YAML::Node list = map.Get("points");
      if (!list.IsSequence() || list.size() == 0) {
        errors.Add(map.PathOf("points"), "must be a non-empty list of [offset, cpu, memory]");
      } else {
        Usage previous = requests;
        for (size_t i = 0; i < list.size(); ++i) {
          std::string p_path = IndexPath(map.PathOf("points"), i);
          std::vector<std::string> fields;
          if (!list[i].IsSequence()) {
            errors.Add(p_path, "must be [offset, cpu, memory]");
            continue;
          }
          for (const auto& f : list[i]) fields.push_back(f.IsScalar() ? f.Scalar() : "?");
          Point p;
          if (ParsePointFields(fields, p_path, previous, &errors, &p)) {
            previous = p.usage;
            points.push_back(p);
          }
        }
        CheckSorted(points, map.PathOf("points"), &errors);
      }
    } else {
      std::string file;
      ReadScalar(map.Get("file"), map.PathOf("file"), &errors, &file);
      absl::StatusOr<std::string> content =
          read_file ? read_file(file) : absl::UnavailableError("no file reader");
      if (!content.ok()) {
        errors.Add(map.PathOf("file"), std::string(content.status().message()));
      } else {
        Usage previous = requests;
        size_t line_number = 0;
        for (absl::string_view line : absl::StrSplit(*content, '\n')) {
          ++line_number;
          std::string trimmed(absl::StripAsciiWhitespace(line));
          if (trimmed.empty() || trimmed[0] == '#') continue;
          std::vector<std::string> fields;
          for (absl::string_view f : absl::StrSplit(trimmed, ',')) {
            fields.emplace_back(absl::StripAsciiWhitespace(f));
          }
          // A header row ("offset,cpu,memory") is allowed on the first line.
          if (points.empty() && !fields.empty() && !fields[0].empty() &&
              absl::ascii_isalpha(fields[0][0])) {
            continue;
          }
          Point p;
          if (!ParsePointFields(fields, absl::StrCat(map.PathOf("file"), ":", line_number),
                                previous, &errors, &p)) {
            break;
          }
          previous = p.usage;
          points.push_back(p);
        }
        if (points.empty() && errors.empty()) errors.Add(map.PathOf("file"), "trace is empty");
        CheckSorted(points, map.PathOf("file"), &errors);
      }
    }
    if (errors.empty()) profile = std::make_unique<SeriesProfile>(std::move(points), loop);
  } else {
    errors.Add(map.PathOf("type"),
               absl::StrCat("must be constant, step, diurnal or trace: \"", type, "\""));
  }
  map.Finish();
  RETURN_IF_ERROR(errors.ToStatus());
  return profile;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UsageProfile>> ParseUsageProfile(const std::string& text,
                                                                const std::string& path,
                                                                const Usage& requests,
                                                                const std::string& noise_key,
                                                                const FileReader& read_file) {
  try {
    return ParseUnguarded(text, path, requests, noise_key, read_file);
  } catch (const YAML::Exception& e) {
    return InvalidFieldError(path, absl::StrCat("unreadable YAML: ", e.what()));
  }
}

}  // namespace codeco::codef
