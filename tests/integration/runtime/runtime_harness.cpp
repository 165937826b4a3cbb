// Runtime test harness.
#include "tests/integration/runtime/runtime_harness.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace sluice::runtime::test {

std::vector<std::string> Recorded::lines_of(Stream s) {
  std::lock_guard lock(mu);
  std::vector<std::string> out;
  for (const auto& [st, l] : lines)
    if (st == s) out.push_back(l);
  return out;
}

bool Recorded::has_event(EventKind k, const std::string& id) { return last_event(k, id).has_value(); }

std::optional<Event> Recorded::last_event(EventKind k, const std::string& id) {
  std::lock_guard lock(mu);
  for (auto it = events.rbegin(); it != events.rend(); ++it)
    if (it->kind == k && it->status.id == id) return *it;
  return std::nullopt;
}

std::unique_ptr<Runtime> make_runtime(Recorded& rec, const std::string& throttle) {
  RuntimeOptions opts;
  opts.throttle = throttle;
  opts.on_event = [&rec](const Event& e) {
    std::lock_guard lock(rec.mu);
    rec.events.push_back(e);
  };
  opts.on_output = [&rec](const std::string&, Stream s, std::string_view line) {
    std::lock_guard lock(rec.mu);
    rec.lines.emplace_back(s, std::string(line));
  };
  return std::make_unique<Runtime>(std::move(opts));
}

InstanceSpec shell(const std::string& id, const std::string& script) {
  InstanceSpec spec;
  spec.id = id;
  spec.command = {"/bin/sh", "-c", script};
  return spec;
}

long cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace sluice::runtime::test
