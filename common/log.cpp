// JSON-line logger: cheap when a level is off, one write(2) per line so concurrent workers never interleave.
#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace sluice::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::string g_static_fields;  // written once before workers start
std::atomic<bool> g_plain{false};

// Plain lines: `12:00:00.123 message key=value ...`, values quoted only when they hold spaces.
void append_plain_value(std::string& out, std::string_view v) {
  if (!v.empty() && v.find_first_of(" \t\"") == std::string_view::npos) {
    out.append(v);
    return;
  }
  append_json_string(out, v);
}

const char* level_name(Level l) {
  switch (l) {
    case Level::debug: return "DEBUG";
    case Level::info: return "INFO";
    case Level::warn: return "WARN";
    case Level::error: return "ERROR";
  }
  return "INFO";
}

}  // namespace

void set_level(Level l) { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }
Level level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }
void set_static_fields(std::string fields) { g_static_fields = std::move(fields); }
void set_plain(bool on) { g_plain.store(on, std::memory_order_relaxed); }

bool parse_level(std::string_view t, Level& out) {
  if (t == "debug") out = Level::debug;
  else if (t == "info") out = Level::info;
  else if (t == "warn" || t == "warning") out = Level::warn;
  else if (t == "error" || t == "dpanic" || t == "panic" || t == "fatal") out = Level::error;
  else return false;
  return true;
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void append_timestamp(std::string& out) {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  out.append(buf, static_cast<std::size_t>(n));
}

std::atomic<LineSink> g_sink{nullptr};

void set_sink(LineSink sink) { g_sink.store(sink); }

void write_line(std::string& line) {
  line.push_back('\n');
  if (auto sink = g_sink.load(std::memory_order_acquire)) {
    sink(line);
    return;
  }
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // stdout gone: nothing sensible left to do with a log line
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

Line::Line(Level l, std::string_view message) : enabled_(l >= level()), plain_(g_plain.load(std::memory_order_relaxed)) {
  if (!enabled_) return;
  buf_.reserve(256);
  if (plain_) {
    std::string ts;
    append_timestamp(ts);
    buf_.append(ts, 11, 12);  // HH:MM:SS.mmm
    if (l != Level::info) buf_.append(" ").append(level_name(l));
    buf_.push_back(' ');
    buf_.append(message);
    return;
  }
  buf_ += "{\"severity\":\"";
  buf_ += level_name(l);
  buf_ += "\",\"timestamp\":\"";
  append_timestamp(buf_);
  buf_ += "\",\"logger\":\"sluice\",\"message\":";
  append_json_string(buf_, message);
  if (!g_static_fields.empty()) {
    buf_.push_back(',');
    buf_ += g_static_fields;
  }
}

Line::~Line() {
  if (!enabled_) return;
  if (!plain_) buf_.push_back('}');
  write_line(buf_);
}

bool Line::key(std::string_view k) {
  if (!enabled_) return false;
  if (plain_) {
    if (k == "event") return false;  // the message says it already
    buf_.push_back(' ');
    buf_.append(k);
    buf_.push_back('=');
    return true;
  }
  buf_.push_back(',');
  append_json_string(buf_, k);
  buf_.push_back(':');
  return true;
}

Line& Line::kv(std::string_view k, std::string_view v) {
  if (!key(k)) return *this;
  if (plain_) append_plain_value(buf_, v);
  else append_json_string(buf_, v);
  return *this;
}

Line& Line::kv(std::string_view k, std::int64_t v) {
  if (!key(k)) return *this;
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, r.ptr);
  return *this;
}

Line& Line::kv(std::string_view k, std::uint64_t v) {
  if (!key(k)) return *this;
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, r.ptr);
  return *this;
}

Line& Line::kv(std::string_view k, double v) {
  if (!key(k)) return *this;
  char tmp[32];
  int n = std::snprintf(tmp, sizeof tmp, "%.6g", v);
  buf_.append(tmp, static_cast<std::size_t>(n));
  return *this;
}

Line& Line::raw_json(std::string_view k, std::string_view json) {
  if (!key(k)) return *this;
  buf_ += json;
  return *this;
}

Line& Line::kv(std::string_view k, bool v) {
  if (!key(k)) return *this;
  buf_ += v ? "true" : "false";
  return *this;
}

}  // namespace sluice::log
