// Pod cgroups; see pod_cgroup.h. On a hybrid machine (cgroup2 for freezing, v1 for memory and cpu) a pod
// has up to three dirs; on a pure v2 machine one, and its containers are born in it (CLONE_INTO_CGROUP)
// with no migration to pay.
#include "runtime/pod_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "runtime/cgroup_fs.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kCpuPeriodUs = 100000;  // the kernel's and Kubernetes' default CFS period

bool make_dir(const fs::path& dir, std::string& error) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return true;
  error = "mkdir " + dir.string() + ": " + std::strerror(errno);
  return false;
}

bool has_word(const std::string& list, std::string_view word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

std::uint64_t counter(const fs::path& file, std::string_view key) {
  std::istringstream in(cgroup::read_file(file).value_or(""));
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

}  // namespace

std::unique_ptr<PodCgroup> PodCgroup::create(const ThrottleChoice& throttle, const std::string& group_name,
                                             const std::string& pod, const PodLimits& limits,
                                             const std::function<void(const char*, const std::string&)>& record,
                                             std::string& error) {
  std::unique_ptr<PodCgroup> cg(new PodCgroup());
  cg->kind_ = throttle.kind;
  const std::string leaf = "pod-" + pod;
  auto make = [&](const fs::path& dir) {
    record("cgroup", dir.string());
    if (!make_dir(dir, error)) return false;
    cg->dirs_.push_back(dir);
    return true;
  };
  if (uses_cgroup(throttle.kind)) {
    cg->throttle_dir_ = throttle.base / leaf;
    if (!make(cg->throttle_dir_)) return nullptr;
  }
  // A limit goes on the throttle's pod dir when its controller lives in that hierarchy, else on a pod dir
  // of its own v1 hierarchy, which the containers then join.
  auto place = [&](const char* controller, bool same_v1_hierarchy, fs::path& dir, bool& v2) {
    if (is_cgroup2(throttle.kind)) {
      auto available = cgroup::read_file(throttle.base / "cgroup.controllers").value_or("");
      if (has_word(available, controller)) {
        if (!cgroup::write_file(throttle.base / "cgroup.subtree_control", std::string("+") + controller, &error)) {
          error = std::string("enable the ") + controller + " controller in " + throttle.base.string() + ": " + error;
          return false;
        }
        dir = cg->throttle_dir_;
        v2 = true;
        return true;
      }
    }
    if (same_v1_hierarchy) {
      dir = cg->throttle_dir_;
      return true;
    }
    auto h = cgroup::v1(controller);
    if (!h) {
      error = std::string("no ") + controller + " controller: neither in cgroup2 under " + throttle.base.string() +
              " nor a cgroup v1 hierarchy";
      return false;
    }
    auto base = h->own_dir() / group_name;
    record("base", base.string());
    if (!make_dir(base, error) || !make(base / leaf)) return false;
    dir = base / leaf;
    // `tasks`, not cgroup.procs: the joining child is single-threaded and writes "0" (itself), which the
    // kernel moves without the global threadgroup lock; cgroup.procs would wait for an RCU grace period
    // (~5 ms per hierarchy, measured by bench/runtime/sandbox.sh).
    cg->join_files_.push_back(dir / "tasks");
    return true;
  };
  if (limits.memory_bytes) {
    if (!place("memory", false, cg->memory_dir_, cg->memory_v2_)) return nullptr;
    auto bytes = std::to_string(*limits.memory_bytes);
    if (!cgroup::write_file(cg->memory_limit_file(), bytes, &error)) return nullptr;
    // No swap: a pod over its limit is killed, as in Kubernetes, not slowed down to a crawl.
    if (cg->memory_v2_) {
      cgroup::write_file(cg->memory_dir_ / "memory.swap.max", "0");
      if (cgroup::write_file(cg->throttle_dir_ / "cgroup.subtree_control", "+memory"))
        cg->container_limits_ = {{"memory.max", bytes}, {"memory.swap.max", "0"}};
    }
  }
  if (limits.cpu_millis) {
    if (!place("cpu", throttle.kind == ThrottleKind::cgroup1_cfs_quota, cg->cpu_dir_, cg->cpu_v2_)) return nullptr;
    std::uint64_t quota = std::max<std::uint64_t>(1000, *limits.cpu_millis * kCpuPeriodUs / 1000);
    bool ok = cg->cpu_v2_
                  ? cgroup::write_file(cg->cpu_dir_ / "cpu.max",
                                       std::to_string(quota) + " " + std::to_string(kCpuPeriodUs), &error)
                  : cgroup::write_file(cg->cpu_dir_ / "cpu.cfs_period_us", std::to_string(kCpuPeriodUs), &error) &&
                        cgroup::write_file(cg->cpu_dir_ / "cpu.cfs_quota_us", std::to_string(quota), &error);
    if (!ok) return nullptr;
  }
  return cg;
}

PodCgroup::~PodCgroup() {
  std::string ignored;
  if (!removed_) remove(ignored);
}

fs::path PodCgroup::memory_limit_file() const {
  if (memory_dir_.empty()) return {};
  return memory_dir_ / (memory_v2_ ? "memory.max" : "memory.limit_in_bytes");
}

fs::path PodCgroup::cpu_limit_file() const {
  if (cpu_dir_.empty()) return {};
  return cpu_dir_ / (cpu_v2_ ? "cpu.max" : "cpu.cfs_quota_us");
}

std::uint64_t PodCgroup::oom_kills() const {
  if (memory_dir_.empty()) return 0;
  return memory_v2_ ? counter(memory_dir_ / "memory.events", "oom_kill")
                    : counter(memory_dir_ / "memory.oom_control", "oom_kill");
}

bool PodCgroup::thaw(std::string& error) {
  if (kind_ == ThrottleKind::cgroup2_freeze) return cgroup::write_file(throttle_dir_ / "cgroup.freeze", "0", &error);
  if (kind_ == ThrottleKind::cgroup1_freezer)
    return cgroup::write_file(throttle_dir_ / "freezer.state", "THAWED", &error);
  return true;
}

bool PodCgroup::remove(std::string& error) {
  std::string ignored;
  thaw(ignored);
  bool all = true;
  // Deepest first: the containers' dirs are gone already (the runtime removes them before the pod).
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    if (!cgroup::write_file(*it / "cgroup.kill", "1")) {
      std::istringstream in(cgroup::read_file(*it / "cgroup.procs").value_or(""));
      pid_t pid;
      while (in >> pid) ::kill(pid, SIGKILL);
    }
    if (!cgroup::remove_dir(*it, std::chrono::seconds(5), &error)) all = false;
  }
  removed_ = all;
  return all;
}

void release_sandbox_bases(const std::string& group_name) {
  for (const char* controller : {"memory", "cpu"})
    if (auto h = cgroup::v1(controller)) ::rmdir((h->own_dir() / group_name).c_str());
}

}  // namespace sluice::runtime
