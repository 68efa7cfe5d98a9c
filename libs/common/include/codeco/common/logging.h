#pragma once
// Structured logs: one JSON object per line on stderr, with a timestamp,
// level, service, message and key/value fields. Thread-safe.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace codeco::log {

/// Severity of a log line.
enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

/// Key/value pairs attached to a log line.
using Fields = std::vector<std::pair<std::string, std::string>>;

/// Sets the minimum level written (default kInfo).
void SetLevel(Level level);
/// Parses "debug", "info", "warn" or "error"; false when unknown.
bool ParseLevel(std::string_view text, Level* level);
/// Sets the "svc" field of every line (e.g. "acm").
void SetService(std::string service);
/// True when a line at `level` would be written.
bool Enabled(Level level);
/// Writes one line at `level`.
void Write(Level level, std::string_view message, const Fields& fields = {});

/// Writes a debug line.
inline void Debug(std::string_view m, const Fields& f = {}) { Write(Level::kDebug, m, f); }
/// Writes an info line.
inline void Info(std::string_view m, const Fields& f = {}) { Write(Level::kInfo, m, f); }
/// Writes a warning line.
inline void Warn(std::string_view m, const Fields& f = {}) { Write(Level::kWarn, m, f); }
/// Writes an error line.
inline void Error(std::string_view m, const Fields& f = {}) { Write(Level::kError, m, f); }

}  // namespace codeco::log
