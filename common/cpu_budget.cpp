// CPUs this process may use; see cpu_budget.h.
#include "common/cpu_budget.h"

#include <sched.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace sluice {
namespace {

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> out;
  std::size_t from = 0;
  while (from <= s.size()) {
    auto at = s.find(by, from);
    if (at == std::string_view::npos) at = s.size();
    out.push_back(s.substr(from, at - from));
    from = at + 1;
  }
  return out;
}

std::vector<std::string_view> lines(std::string_view text) {
  auto out = split(text, '\n');
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

std::optional<double> number(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  std::int64_t v = 0;
  auto [ptr, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (err != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return static_cast<double>(v);
}

// A mount of the cgroup file system: where it is, and which part of the hierarchy it shows.
struct CgroupMount {
  std::string root, mount_point;
};

// mountinfo: "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS".
// v1 mounts name their controllers in SUPER_OPTIONS ("rw,cpu,cpuacct").
std::optional<CgroupMount> find_mount(std::string_view mountinfo, std::string_view fstype,
                                      std::string_view controller) {
  for (auto line : lines(mountinfo)) {
    auto fields = split(line, ' ');
    std::size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 5 || dash + 3 >= fields.size() || fields[dash + 1] != fstype) continue;
    if (!controller.empty()) {
      bool has = false;
      for (auto opt : split(fields[dash + 3], ',')) has = has || opt == controller;
      if (!has) continue;
    }
    return CgroupMount{std::string(fields[3]), std::string(fields[4])};
  }
  return std::nullopt;
}

// The directory of `path` (a line of /proc/self/cgroup) under `mount`.
std::string cgroup_dir(const CgroupMount& mount, std::string_view path) {
  if (mount.root != "/" && path.starts_with(mount.root)) path.remove_prefix(mount.root.size());
  std::string dir = mount.mount_point;
  if (!path.empty() && path != "/") dir += path;
  return dir;
}

}  // namespace

std::optional<double> cgroup_cpu_quota(std::string_view mountinfo, std::string_view proc_cgroup,
                                       const std::function<std::optional<std::string>(const std::string&)>& read) {
  // /proc/self/cgroup: "0::PATH" for v2; "N:CONTROLLERS:PATH" for each v1 hierarchy.
  for (auto line : lines(proc_cgroup)) {
    auto fields = split(line, ':');
    if (fields.size() < 3) continue;
    auto path = line.substr(fields[0].size() + fields[1].size() + 2);
    if (fields[0] == "0" && fields[1].empty()) {
      auto mount = find_mount(mountinfo, "cgroup2", "");
      if (!mount) continue;
      auto text = read(cgroup_dir(*mount, path) + "/cpu.max");  // "QUOTA PERIOD", QUOTA may be "max"
      if (!text) continue;
      auto parts = split(*text, ' ');
      if (parts.size() < 2) return std::nullopt;
      auto quota = number(parts[0]), period = number(parts[1]);
      if (!quota || !period || *period <= 0 || *quota < 0) return std::nullopt;
      return *quota / *period;
    }
    bool cpu = false;
    for (auto c : split(fields[1], ',')) cpu = cpu || c == "cpu";
    if (!cpu) continue;
    auto mount = find_mount(mountinfo, "cgroup", "cpu");
    if (!mount) return std::nullopt;
    auto dir = cgroup_dir(*mount, path);
    auto quota_text = read(dir + "/cpu.cfs_quota_us");
    auto period_text = read(dir + "/cpu.cfs_period_us");
    if (!quota_text || !period_text) return std::nullopt;
    auto quota = number(*quota_text), period = number(*period_text);
    if (!quota || !period || *quota < 0 || *period <= 0) return std::nullopt;  // -1: no quota
    return *quota / *period;
  }
  return std::nullopt;
}

unsigned usable_cpus() {
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  auto slurp = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  auto quota = cgroup_cpu_quota(slurp("/proc/self/mountinfo").value_or(""), slurp("/proc/self/cgroup").value_or(""), slurp);
  if (quota) cpus = std::min(cpus, static_cast<unsigned>(std::max(1.0, std::floor(*quota))));
  return cpus;
}

}  // namespace sluice
