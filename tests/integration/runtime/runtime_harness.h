// Test harness around a Runtime: records events and output lines thread-safely, reads /proc CPU time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace sluice::runtime::test {

struct Recorded {
  std::mutex mu;
  std::vector<Event> events;
  std::vector<std::pair<Stream, std::string>> lines;

  std::vector<std::string> lines_of(Stream s);
  bool has_event(EventKind k, const std::string& id);
  std::optional<Event> last_event(EventKind k, const std::string& id);
};

// A runtime whose callbacks feed `rec`; `throttle` as in RuntimeOptions.
std::unique_ptr<Runtime> make_runtime(Recorded& rec, const std::string& throttle = "auto");

InstanceSpec shell(const std::string& id, const std::string& script);

// utime + stime of a process in clock ticks, from /proc/<pid>/stat; -1 when gone.
long cpu_ticks(pid_t pid);

bool path_exists(const std::string& path);

}  // namespace sluice::runtime::test
