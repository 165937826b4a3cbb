// What the dashboard shows of the recent past: the last requests (GET /.sluice/requests) and each
// instance's last output lines, kept a while after it ended (GET /.sluice/logs). Bounded: a ring of
// requests, and a ring of lines per instance for the live ones and the last ones that ended. Any thread;
// each behind its own lock, held for a copy.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

namespace sluice::app::gateway {

class RecentRequests {
 public:
  struct Entry {
    std::int64_t at_ms = 0;  // wall clock, when it ended
    std::string method, path, service, revision, instance;
    unsigned status = 0;
    double duration_ms = 0;
    bool cold_start = false;
  };
  static constexpr std::size_t kKept = 100;
  static constexpr std::size_t kPathKept = 256;  // longer targets are cut (with "…")

  void add(Entry e);
  // Newest first.
  boost::json::array json() const;

 private:
  mutable std::mutex mu_;
  std::deque<Entry> entries_;
};

class InstanceLogs {
 public:
  static constexpr std::size_t kLinesKept = 50;
  static constexpr std::size_t kLineKept = 1024;  // bytes of a line kept (longer ones are cut, with "…")
  static constexpr std::size_t kEndedKept = 16;   // instances that ended, whose lines stay to be read

  void add(const std::string& service, const std::string& instance, std::string_view line);
  // Its last `n` lines, oldest first.
  std::deque<std::string> last(const std::string& instance, std::size_t n) const;
  // It ended: its lines stay until kEndedKept later instances have ended too.
  void ended(const std::string& instance);
  // {"instance": {"service": name, "ended": bool, "lines": [...]}, ...}
  boost::json::object json() const;

 private:
  struct Kept {
    std::string service;
    std::deque<std::string> lines;
    bool ended = false;
  };
  mutable std::mutex mu_;
  std::map<std::string, Kept> by_instance_;
  std::deque<std::string> ended_;  // oldest first
};

}  // namespace sluice::app::gateway
