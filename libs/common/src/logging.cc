#include "codeco/common/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace codeco::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_mu;
std::string g_service = "codeco";  // guarded by g_mu

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

// Appends `text` as a JSON string literal.
void AppendJsonString(std::string* out, std::string_view text) {
  out->push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }

bool ParseLevel(std::string_view text, Level* level) {
  for (Level l : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    if (text == LevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

void SetService(std::string service) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_service = std::move(service);
}

bool Enabled(Level level) { return static_cast<int>(level) >= g_level.load(); }

void Write(Level level, std::string_view message, const Fields& fields) {
  if (!Enabled(level)) return;
  std::string line = "{\"ts\":";
  AppendJsonString(&line, absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()));
  line.append(",\"level\":");
  AppendJsonString(&line, LevelName(level));
  std::lock_guard<std::mutex> lock(g_mu);
  line.append(",\"svc\":");
  AppendJsonString(&line, g_service);
  line.append(",\"msg\":");
  AppendJsonString(&line, message);
  for (const auto& [key, value] : fields) {
    line.push_back(',');
    AppendJsonString(&line, key);
    line.push_back(':');
    AppendJsonString(&line, value);
  }
  line.append("}\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace codeco::log
