// Start-up, error and request logs as JSON lines on stdout, shaped like Knative's zap output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

// Process-wide settings, fixed at start-up before any worker runs.
void set_level(Level level);
Level level();
// Extra fields on every line (Knative adds knative.dev/key and knative.dev/pod).
void set_static_fields(std::string json_fields_without_braces);
bool parse_level(std::string_view text, Level& out);
// Human lines (`12:00:00.123 message key=value`) instead of JSON, for a terminal.
void set_plain(bool on);

// Appends `text` as a JSON string literal (with quotes) to `out`.
void append_json_string(std::string& out, std::string_view text);
// Current UTC time as ISO 8601 with milliseconds, e.g. 2026-11-22T10:00:00.123Z.
void append_timestamp(std::string& out);

// One log line, built with kv() and written (one write(2), so lines never interleave) on destruction.
class Line {
 public:
  Line(Level level, std::string_view message);
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  ~Line();

  Line& kv(std::string_view key, std::string_view value);
  Line& kv(std::string_view key, const char* value) { return kv(key, std::string_view(value)); }
  Line& kv(std::string_view key, const std::string& value) { return kv(key, std::string_view(value)); }
  Line& kv(std::string_view key, std::int64_t value);
  Line& kv(std::string_view key, int value) { return kv(key, static_cast<std::int64_t>(value)); }
  Line& kv(std::string_view key, unsigned value) { return kv(key, static_cast<std::int64_t>(value)); }
  Line& kv(std::string_view key, std::uint64_t value);
  Line& kv(std::string_view key, double value);
  Line& kv(std::string_view key, bool value);
  // `json` is a complete JSON value, written as is (plain lines show it as text too).
  Line& raw_json(std::string_view key, std::string_view json);

 private:
  bool key(std::string_view k);  // appends the key; false when nothing is to be written

  bool enabled_;
  bool plain_ = false;
  std::string buf_;
};

inline Line debug(std::string_view m) { return Line(Level::debug, m); }
inline Line info(std::string_view m) { return Line(Level::info, m); }
inline Line warn(std::string_view m) { return Line(Level::warn, m); }
inline Line error(std::string_view m) { return Line(Level::error, m); }

// Writes a complete line (a newline is appended) to stdout with a single write(2), or hands it to the
// sink when one is set (the gateway's terminal view keeps its table below the log lines so).
void write_line(std::string& line);
using LineSink = void (*)(std::string& line_with_newline);
void set_sink(LineSink sink);  // nullptr: stdout again

}  // namespace sluice::log
