// Per-instance cgroup operations for the four cgroup throttle kinds.
#include "runtime/instance_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "runtime/cgroup_fs.h"

namespace sluice::runtime {

namespace {
// Quota throttles keep 1 ms of CPU per 1 s period: the smallest quota both cgroup versions accept.
constexpr const char* kQuotaV2 = "1000 1000000";
constexpr const char* kUnlimitedV2 = "max 100000";
}  // namespace

std::unique_ptr<InstanceCgroup> InstanceCgroup::create(const ThrottleChoice& choice, const std::string& id,
                                                       std::string& error) {
  auto dir = choice.base / id;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    error = "mkdir " + dir.string() + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<InstanceCgroup> cg(new InstanceCgroup(choice.kind, dir));
  if (choice.kind == ThrottleKind::cgroup1_cfs_quota)
    cgroup::write_file(dir / "cpu.cfs_period_us", "1000000", nullptr);
  cg->procs_fd_ = ::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (cg->procs_fd_ < 0) {
    error = "open " + (dir / "cgroup.procs").string() + ": " + std::strerror(errno);
    cg->remove(error);
    return nullptr;
  }
  return cg;
}

InstanceCgroup::~InstanceCgroup() {
  close_procs_fd();
  if (!removed_) {
    std::string ignored;
    remove(ignored);
  }
}

void InstanceCgroup::close_procs_fd() {
  if (procs_fd_ >= 0) ::close(procs_fd_);
  procs_fd_ = -1;
}

bool InstanceCgroup::wait_for(const char* file, const char* needle, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto text = cgroup::read_file(dir_ / file);
    if (text && text->find(needle) != std::string::npos) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Freezing settles within microseconds for idle tasks; a short yield keeps the common case fast.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// The v1 freezer walks the cgroup's tasks once per write of FROZEN; a task that was mid-fork or otherwise not
// freezable at that moment leaves the cgroup in FREEZING until FROZEN is written again (loaded hosts show it:
// a shell forking `sleep` in a loop). So the write is repeated while waiting, and if that still does not settle,
// a brief THAWED lets the stuck task run past the point where it could not stop.
bool InstanceCgroup::freeze_v1(std::string& error) {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::seconds(4);
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0 && attempt % 20 == 0) {
      cgroup::write_file(dir_ / "freezer.state", "THAWED", &error);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!cgroup::write_file(dir_ / "freezer.state", "FROZEN", &error)) return false;
    if (wait_for("freezer.state", "FROZEN", std::chrono::milliseconds(attempt == 0 ? 50 : 20))) return true;
    if (clock::now() >= deadline) break;
  }
  error = "cgroup " + dir_.string() + " stayed FREEZING for 4 s (FROZEN rewritten, thawed and refrozen)";
  return false;
}

bool InstanceCgroup::freeze(std::string& error) {
  switch (kind_) {
    case ThrottleKind::cgroup2_freeze:
      if (!cgroup::write_file(dir_ / "cgroup.freeze", "1", &error)) return false;
      if (!wait_for("cgroup.events", "frozen 1", std::chrono::seconds(2))) {
        error = "cgroup " + dir_.string() + " did not report frozen within 2 s";
        return false;
      }
      return true;
    case ThrottleKind::cgroup1_freezer: return freeze_v1(error);
    case ThrottleKind::cgroup2_cpu_max: return cgroup::write_file(dir_ / "cpu.max", kQuotaV2, &error);
    case ThrottleKind::cgroup1_cfs_quota: return cgroup::write_file(dir_ / "cpu.cfs_quota_us", "1000", &error);
    default: error = "not a cgroup throttle"; return false;
  }
}

bool InstanceCgroup::thaw(std::string& error) {
  // No waiting here: the write wakes the tasks, and thaw latency is what a request pays.
  switch (kind_) {
    case ThrottleKind::cgroup2_freeze: return cgroup::write_file(dir_ / "cgroup.freeze", "0", &error);
    case ThrottleKind::cgroup1_freezer: return cgroup::write_file(dir_ / "freezer.state", "THAWED", &error);
    case ThrottleKind::cgroup2_cpu_max: return cgroup::write_file(dir_ / "cpu.max", kUnlimitedV2, &error);
    case ThrottleKind::cgroup1_cfs_quota: return cgroup::write_file(dir_ / "cpu.cfs_quota_us", "-1", &error);
    default: error = "not a cgroup throttle"; return false;
  }
}

std::vector<pid_t> InstanceCgroup::pids() const {
  std::vector<pid_t> out;
  std::istringstream in(cgroup::read_file(dir_ / "cgroup.procs").value_or(""));
  pid_t pid;
  while (in >> pid) out.push_back(pid);
  return out;
}

void InstanceCgroup::kill_all() {
  std::string ignored;
  thaw(ignored);
  if (is_cgroup2(kind_) && cgroup::write_file(dir_ / "cgroup.kill", "1", nullptr)) return;
  // v1 has no cgroup.kill: signal each member; a fork racing this is caught by the caller's retries.
  for (pid_t pid : pids()) ::kill(pid, SIGKILL);
}

bool InstanceCgroup::remove(std::string& error) {
  close_procs_fd();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!pids().empty() && std::chrono::steady_clock::now() < deadline) {
    kill_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  removed_ = cgroup::remove_dir(dir_, std::chrono::seconds(2), &error);
  return removed_;
}

}  // namespace sluice::runtime
