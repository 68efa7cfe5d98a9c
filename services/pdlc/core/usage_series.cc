#include "pdlc/core/usage_series.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace codeco::pdlc {
namespace {

struct Row {
  int64_t minute;
  double cpu;
  double mem;
  size_t line;
};

absl::Status LineError(size_t line, absl::string_view column, absl::string_view message) {
  return absl::InvalidArgumentError(
      column.empty() ? absl::StrCat("line ", line, ": ", message)
                     : absl::StrCat("line ", line, ": ", column, ": ", message));
}

absl::StatusOr<double> ParsePercent(absl::string_view text, size_t line, absl::string_view column) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) {
    return LineError(line, column, absl::StrCat("not a number: \"", text.substr(0, 40), "\""));
  }
  if (!std::isfinite(value) || value < 0 || value > 1000) {
    return LineError(line, column, absl::StrCat("must be a percentage in [0, 1000], got ", text));
  }
  return value;
}

}  // namespace

std::vector<UsageSeries> NeighborMeans(const std::vector<UsageSeries>& series) {
  // group -> minute -> (cpu sum, memory sum, samples): every member's
  // samples, so a node's neighbours are its group less itself.
  struct Sum {
    double cpu = 0, mem = 0;
    int count = 0;
  };
  std::map<std::string, std::map<int64_t, Sum>> sums;
  for (const UsageSeries& s : series) {
    if (s.group.empty()) continue;
    auto& by_minute = sums[s.group];
    for (size_t k = 0; k < s.size(); ++k) {
      Sum& sum = by_minute[s.first_minute + static_cast<int64_t>(k) * kSampleStepMinutes];
      sum.cpu += s.cpu_percent[k];
      sum.mem += s.mem_percent[k];
      ++sum.count;
    }
  }
  std::vector<UsageSeries> out;
  out.reserve(series.size());
  for (const UsageSeries& s : series) {
    UsageSeries mean = s;  // own samples stand in where no neighbour has one
    mean.node = s.node + "/neighbors";
    auto group = sums.find(s.group);
    if (!s.group.empty() && group != sums.end()) {
      for (size_t k = 0; k < s.size(); ++k) {
        auto at = group->second.find(s.first_minute + static_cast<int64_t>(k) * kSampleStepMinutes);
        if (at == group->second.end() || at->second.count < 2) continue;  // only itself
        const double others = at->second.count - 1;
        mean.cpu_percent[k] = (at->second.cpu - s.cpu_percent[k]) / others;
        mean.mem_percent[k] = (at->second.mem - s.mem_percent[k]) / others;
      }
    }
    out.push_back(std::move(mean));
  }
  return out;
}

uint64_t StableHash(absl::string_view text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

const char* UsageMetricName(UsageMetric metric) {
  return metric == UsageMetric::kCpu ? "cpu" : "memory";
}

const std::vector<double>& MetricValues(const UsageSeries& series, UsageMetric metric) {
  return metric == UsageMetric::kCpu ? series.cpu_percent : series.mem_percent;
}

absl::StatusOr<std::vector<UsageSeries>> ParseUsageTrace(std::istream& in,
                                                         std::vector<std::string>* warnings,
                                                         const TraceLimits& limits) {
  std::string line;
  size_t line_number = 0;
  // Column positions, found from the header.
  int vm_col = -1, minute_col = -1, cpu_col = -1, mem_col = -1, group_col = -1;
  // node -> its group and the line that first gave it.
  std::map<std::string, std::pair<std::string, size_t>, std::less<>> group_of;
  size_t column_count = 0;
  std::map<std::string, std::vector<Row>, std::less<>> rows_by_node;
  size_t sample_count = 0;

  auto read_line = [&]() -> absl::StatusOr<bool> {
    line.clear();
    // Reads by character up to the limit so one endless line cannot grow the buffer.
    int c;
    while ((c = in.get()) != EOF && c != '\n') {
      if (line.size() >= limits.max_line_bytes) {
        return LineError(line_number + 1, "", absl::StrCat("longer than ", limits.max_line_bytes, " bytes"));
      }
      line.push_back(static_cast<char>(c));
    }
    if (c == EOF && line.empty()) return false;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };

  // Header.
  while (true) {
    auto more = read_line();
    if (!more.ok()) return more.status();
    if (!*more) return absl::InvalidArgumentError("trace is empty: expected the header vm,minute,cpu_percent,mem_percent");
    if (!absl::StripAsciiWhitespace(line).empty()) break;
  }
  std::vector<std::string> header = absl::StrSplit(line, ',');
  column_count = header.size();
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string name(absl::StripAsciiWhitespace(header[i]));
    int* slot = name == "vm"            ? &vm_col
                : name == "minute"      ? &minute_col
                : name == "cpu_percent" ? &cpu_col
                : name == "mem_percent" ? &mem_col
                : name == "group"       ? &group_col
                                        : nullptr;
    if (slot == nullptr) {
      if (warnings) warnings->push_back(absl::StrCat("header: column \"", name, "\" is not used"));
      continue;
    }
    if (*slot >= 0) return LineError(line_number, name, "column appears twice in the header");
    *slot = static_cast<int>(i);
  }
  for (auto [col, name] : {std::pair{vm_col, "vm"}, {minute_col, "minute"}, {cpu_col, "cpu_percent"},
                           {mem_col, "mem_percent"}}) {
    if (col < 0) return LineError(line_number, name, "missing from the header (expected vm,minute,cpu_percent,mem_percent)");
  }

  while (true) {
    auto more = read_line();
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    if (fields.size() != column_count) {
      return LineError(line_number, "", absl::StrCat("has ", fields.size(), " columns, the header has ", column_count));
    }
    for (auto& f : fields) f = absl::StripAsciiWhitespace(f);
    const absl::string_view vm = fields[vm_col];
    if (vm.empty()) return LineError(line_number, "vm", "is empty");
    int64_t minute = 0;
    {
      const absl::string_view text = fields[minute_col];
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), minute);
      if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || minute < 0) {
        return LineError(line_number, "minute", absl::StrCat("not a non-negative integer: \"", text.substr(0, 40), "\""));
      }
      if (minute % kSampleStepMinutes != 0) {
        return LineError(line_number, "minute",
                         absl::StrCat(minute, " is not on the ", kSampleStepMinutes, "-minute sample grid"));
      }
    }
    auto cpu = ParsePercent(fields[cpu_col], line_number, "cpu_percent");
    if (!cpu.ok()) return cpu.status();
    auto mem = ParsePercent(fields[mem_col], line_number, "mem_percent");
    if (!mem.ok()) return mem.status();
    if (++sample_count > limits.max_samples) {
      return LineError(line_number, "", absl::StrCat("the trace has more than ", limits.max_samples, " samples"));
    }
    auto it = rows_by_node.find(vm);
    if (it == rows_by_node.end()) it = rows_by_node.emplace(std::string(vm), std::vector<Row>{}).first;
    if (group_col >= 0) {
      const absl::string_view group = fields[group_col];
      auto known = group_of.find(vm);
      if (known == group_of.end()) {
        group_of.emplace(std::string(vm), std::pair{std::string(group), line_number});
      } else if (known->second.first != group) {
        return LineError(line_number, "group",
                         absl::StrCat("vm ", vm, " is in group \"", known->second.first.substr(0, 40),
                                      "\" on line ", known->second.second, ", here \"",
                                      group.substr(0, 40), "\""));
      }
    }
    it->second.push_back({minute, *cpu, *mem, line_number});
  }

  std::vector<UsageSeries> out;
  for (auto& [node, rows] : rows_by_node) {
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.minute < b.minute; });
    int part = 1;
    UsageSeries current;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i > 0 && rows[i].minute == rows[i - 1].minute) {
        return LineError(rows[i].line, "minute",
                         absl::StrCat("minute ", rows[i].minute, " of vm ", node, " already given on line ", rows[i - 1].line));
      }
      if (i == 0 || rows[i].minute != rows[i - 1].minute + kSampleStepMinutes) {
        if (i > 0) out.push_back(std::move(current));
        current = UsageSeries{};
        current.node = node;
        current.part = part;
        current.first_minute = rows[i].minute;
        if (auto g = group_of.find(node); g != group_of.end()) current.group = g->second.first;
        ++part;
      }
      current.cpu_percent.push_back(rows[i].cpu);
      current.mem_percent.push_back(rows[i].mem);
    }
    if (!rows.empty()) out.push_back(std::move(current));
  }
  return out;
}

void SplitByNode(std::vector<UsageSeries> series, double first_share, std::vector<UsageSeries>* first,
                 std::vector<UsageSeries>* second) {
  for (auto& s : series) {
    // By name alone, so every part of one node lands on one side.
    const double u = static_cast<double>(StableHash(s.node) % 1'000'000) / 1'000'000.0;
    (u < first_share ? first : second)->push_back(std::move(s));
  }
}

}  // namespace codeco::pdlc
