// Throttle detection: each cgroup mechanism is proven by creating a probe cgroup, not guessed from mounts.
#include "runtime/throttle.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/config_error.h"
#include "runtime/cgroup_fs.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;
constexpr ThrottleKind kAll[] = {ThrottleKind::cgroup2_freeze, ThrottleKind::cgroup2_cpu_max,
                                 ThrottleKind::cgroup1_freezer, ThrottleKind::cgroup1_cfs_quota,
                                 ThrottleKind::sigstop, ThrottleKind::none};

// The file a probe child cgroup must have for the mechanism to work.
const char* control_file(ThrottleKind k) {
  switch (k) {
    case ThrottleKind::cgroup2_freeze: return "cgroup.freeze";
    case ThrottleKind::cgroup2_cpu_max: return "cpu.max";
    case ThrottleKind::cgroup1_freezer: return "freezer.state";
    case ThrottleKind::cgroup1_cfs_quota: return "cpu.cfs_quota_us";
    default: return "";
  }
}

bool make_dir(const fs::path& dir, std::string& why) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return true;
  why = "mkdir " + dir.string() + ": " + std::strerror(errno);
  return false;
}

// Creates base, and proves the mechanism with a throwaway child cgroup; "" when usable, else why not.
std::string probe(ThrottleKind k, const std::string& group_name, fs::path& base) {
  std::optional<cgroup::Hierarchy> h;
  if (is_cgroup2(k)) {
    h = cgroup::unified();
    if (!h) return "no cgroup2 hierarchy mounted";
  } else {
    const char* ctrl = k == ThrottleKind::cgroup1_freezer ? "freezer" : "cpu";
    h = cgroup::v1(ctrl);
    if (!h) return std::string("no cgroup v1 ") + ctrl + " hierarchy mounted";
  }
  base = h->own_dir() / group_name;
  std::string why;
  if (!make_dir(base, why)) return why;
  if (k == ThrottleKind::cgroup2_cpu_max) {
    // v2 controllers may be absent even where cgroup2 is mounted (hybrid machines keep cpu on v1).
    auto ctrls = cgroup::read_file(base / "cgroup.controllers").value_or("");
    if (ctrls.find("cpu") == std::string::npos || !cgroup::write_file(base / "cgroup.subtree_control", "+cpu")) {
      cgroup::remove_dir(base, std::chrono::milliseconds(0), nullptr);
      return "cgroup2 cpu controller not available under " + h->own_dir().string();
    }
  }
  auto probe_dir = base / "probe";
  if (!make_dir(probe_dir, why)) {
    cgroup::remove_dir(base, std::chrono::milliseconds(0), nullptr);
    return why;
  }
  bool ok = ::access((probe_dir / control_file(k)).c_str(), W_OK) == 0;
  cgroup::remove_dir(probe_dir, std::chrono::milliseconds(100), nullptr);
  if (!ok) {
    cgroup::remove_dir(base, std::chrono::milliseconds(0), nullptr);
    return std::string(control_file(k)) + " not writable in " + probe_dir.string();
  }
  return "";
}

}  // namespace

std::string_view to_string(ThrottleKind k) {
  switch (k) {
    case ThrottleKind::cgroup2_freeze: return "cgroup2-freeze";
    case ThrottleKind::cgroup2_cpu_max: return "cgroup2-cpu-max";
    case ThrottleKind::cgroup1_freezer: return "cgroup1-freezer";
    case ThrottleKind::cgroup1_cfs_quota: return "cgroup1-cfs-quota";
    case ThrottleKind::sigstop: return "sigstop";
    case ThrottleKind::none: return "none";
  }
  return "?";
}

std::optional<ThrottleKind> parse_throttle(std::string_view name) {
  for (auto k : kAll)
    if (to_string(k) == name) return k;
  return std::nullopt;
}

bool uses_cgroup(ThrottleKind k) { return k != ThrottleKind::sigstop && k != ThrottleKind::none; }

bool is_cgroup2(ThrottleKind k) {
  return k == ThrottleKind::cgroup2_freeze || k == ThrottleKind::cgroup2_cpu_max;
}

ThrottleChoice choose_throttle(std::optional<ThrottleKind> forced, const std::string& group_name) {
  ThrottleChoice choice;
  if (forced) {
    choice.kind = *forced;
    if (uses_cgroup(*forced)) {
      auto why = probe(*forced, group_name, choice.base);
      if (!why.empty())
        throw ConfigError("throttle '" + std::string(to_string(*forced)) + "' is not usable here: " + why);
    }
    choice.detail = "requested";
    return choice;
  }
  for (auto k : kAll) {
    if (!uses_cgroup(k)) {
      choice.kind = k;
      break;
    }
    fs::path base;
    auto why = probe(k, group_name, base);
    if (why.empty()) {
      choice.kind = k;
      choice.base = base;
      break;
    }
    if (!choice.detail.empty()) choice.detail += "; ";
    choice.detail += std::string(to_string(k)) + ": " + why;
  }
  return choice;
}

void release_throttle(const ThrottleChoice& choice) {
  if (!choice.base.empty()) cgroup::remove_dir(choice.base, std::chrono::milliseconds(500), nullptr);
}

}  // namespace sluice::runtime
