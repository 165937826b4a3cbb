// Process tasks: signals go to the process group; freeze goes through the cgroup or SIGSTOP.
#include "runtime/process_handler.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime/cgroup_fs.h"
#include "runtime/exec.h"
#include "runtime/instance_cgroup.h"
#include "runtime/spawn.h"

namespace sluice::runtime {
namespace {

// Third field of /proc/<pid>/stat, after the parenthesised command name.
char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

bool cannot_run(char state) { return state == 'T' || state == 't' || state == 'D'; }

// The parts of a started instance an Exec must reproduce: where and as whom it runs.
struct ExecContext {
  std::vector<std::string> env;
  std::filesystem::path working_dir;
  std::filesystem::path cgroup_dir;  // its throttle cgroup, if any
  std::vector<std::filesystem::path> join_files;
  int netns_fd = -1;                 // dups, owned here
  int ipcns_fd = -1;
  int uid = -1, gid = -1;
};

class ProcessTask : public Task {
 public:
  ProcessTask(Spawned s, std::unique_ptr<InstanceCgroup> cg, ThrottleKind kind, ExecContext ctx)
      : pid_(s.pid), pidfd_(s.pidfd), cgroup_(std::move(cg)), kind_(kind), ctx_(std::move(ctx)) {}
  ~ProcessTask() override {
    cleanup();
    ::close(pidfd_);
    if (ctx_.netns_fd >= 0) ::close(ctx_.netns_fd);
    if (ctx_.ipcns_fd >= 0) ::close(ctx_.ipcns_fd);
  }

  ExecResult exec(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) override {
    SpawnRequest sr;
    sr.argv = argv;
    sr.env = ctx_.env;
    sr.working_dir = ctx_.working_dir;
    sr.netns_fd = ctx_.netns_fd;
    sr.ipcns_fd = ctx_.ipcns_fd;
    sr.uid = ctx_.uid;
    sr.gid = ctx_.gid;
    std::vector<int> fds;
    for (const auto& f : ctx_.join_files) fds.push_back(::open(f.c_str(), O_WRONLY | O_CLOEXEC));
    if (!ctx_.cgroup_dir.empty()) fds.push_back(::open((ctx_.cgroup_dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    for (int fd : fds) if (fd >= 0) sr.join_procs_fds.push_back(fd);
    auto result = run_captured(sr, timeout);
    for (int fd : fds) if (fd >= 0) ::close(fd);
    return result;
  }

  pid_t pid() const override { return pid_; }
  int pidfd() const override { return pidfd_; }
  void terminate() override { ::kill(-pid_, SIGTERM); }

  void kill() override {
    if (cgroup_) cgroup_->kill_all();
    ::kill(-pid_, SIGKILL);
  }

  bool freeze(std::string& error) override {
    if (cgroup_) return cgroup_->freeze(error);
    if (kind_ == ThrottleKind::none) {
      error = "CPU throttling is off (throttle 'none')";
      return false;
    }
    if (::kill(-pid_, SIGSTOP) != 0) {
      error = "SIGSTOP to process group " + std::to_string(pid_) + " failed";
      return false;
    }
    // Delivery is asynchronous: report frozen only once the leader can no longer run. 'D' counts: a shell
    // waiting for a vfork child that the same SIGSTOP caught before its exec stays in D until SIGCONT.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!cannot_run(process_state(pid_))) {
      if (std::chrono::steady_clock::now() >= deadline) {
        error = "process " + std::to_string(pid_) + " not stopped 2 s after SIGSTOP (state " +
                process_state(pid_) + ")";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }

  bool thaw(std::string& error) override {
    if (cgroup_) return cgroup_->thaw(error);
    if (kind_ == ThrottleKind::none) return true;
    if (::kill(-pid_, SIGCONT) != 0) {
      error = "SIGCONT to process group " + std::to_string(pid_) + " failed";
      return false;
    }
    return true;
  }

  std::string throttle_name() const override { return std::string(to_string(kind_)); }

  void cleanup() override {
    if (cleaned_) return;
    cleaned_ = true;
    if (cgroup_) {
      std::string ignored;
      cgroup_->remove(ignored);
    } else {
      // Without a cgroup the group id is all we have; members that outlived the leader keep it valid.
      ::kill(-pid_, SIGKILL);
    }
  }

 private:
  pid_t pid_;
  int pidfd_;
  std::unique_ptr<InstanceCgroup> cgroup_;
  ThrottleKind kind_;
  ExecContext ctx_;
  bool cleaned_ = false;
};

}  // namespace

std::unique_ptr<Task> ProcessHandler::start(const StartRequest& req, std::string& error) {
  std::unique_ptr<InstanceCgroup> cg;
  if (uses_cgroup(throttle_.kind)) {
    ThrottleChoice where = throttle_;
    if (req.sandbox && !req.sandbox->cgroup_parent.empty()) where.base = req.sandbox->cgroup_parent;
    cg = InstanceCgroup::create(where, req.spec.id, error);
    if (!cg) return nullptr;
    if (req.sandbox)
      for (const auto& [file, value] : req.sandbox->container_limits)
        if (!cgroup::write_file(cg->dir() / file, value, &error)) return nullptr;
  }
  SpawnRequest sr{req.spec.command, req.env, req.spec.working_dir, req.stdout_fd, req.stderr_fd,
                  cg ? cg->procs_fd() : -1, -1, req.spec.die_with_starter ? SIGKILL : 0};
  ExecContext ctx{req.env, req.spec.working_dir, cg ? cg->dir() : std::filesystem::path(), {}, -1, -1, -1, -1};
  if (req.spec.run_as_user) {
    sr.uid = *req.spec.run_as_user;
    sr.gid = req.spec.run_as_group.value_or(static_cast<int>(::getegid()));
  } else if (req.spec.run_as_group) {
    sr.gid = *req.spec.run_as_group;
  }
  std::vector<int> join_fds;
  if (req.sandbox) {
    sr.netns_fd = req.sandbox->netns_fd;
    sr.ipcns_fd = req.sandbox->ipcns_fd;
    for (const auto& f : req.sandbox->join_files) {
      int fd = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        error = "open " + f.string() + ": " + std::strerror(errno);
        for (int j : join_fds) ::close(j);
        return nullptr;
      }
      join_fds.push_back(fd);
    }
    sr.join_procs_fds = join_fds;
    ctx.join_files = req.sandbox->join_files;
    ctx.netns_fd = ::fcntl(req.sandbox->netns_fd, F_DUPFD_CLOEXEC, 0);
    ctx.ipcns_fd = ::fcntl(req.sandbox->ipcns_fd, F_DUPFD_CLOEXEC, 0);
  }
  ctx.uid = sr.uid;
  ctx.gid = sr.gid;
  const bool v2 = throttle_.kind == ThrottleKind::cgroup2_freeze || throttle_.kind == ThrottleKind::cgroup2_cpu_max;
  if (cg && v2) sr.cgroup_dir_fd = ::open(cg->dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto spawned = spawn_process(sr);
  for (int j : join_fds) ::close(j);
  if (sr.cgroup_dir_fd >= 0) ::close(sr.cgroup_dir_fd);
  if (cg) cg->close_procs_fd();
  if (spawned.pid < 0) {
    error = spawned.error;
    if (ctx.netns_fd >= 0) ::close(ctx.netns_fd);
    if (ctx.ipcns_fd >= 0) ::close(ctx.ipcns_fd);
    return nullptr;  // cg's destructor removes the cgroup
  }
  return std::make_unique<ProcessTask>(spawned, std::move(cg), throttle_.kind, std::move(ctx));
}

}  // namespace sluice::runtime
