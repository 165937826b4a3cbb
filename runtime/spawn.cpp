// fork/exec with an error pipe, so a bad command fails start() with the exec errno instead of a crash.
#include "runtime/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/sched.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

extern char** environ;

namespace sluice::runtime {
namespace {

std::vector<char*> cstrs(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Between fork and exec only async-signal-safe calls: everything below is a raw syscall.
[[noreturn]] void child_fail(int err_fd, int err) {
  ssize_t ignored = ::write(err_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

[[noreturn]] void child(const SpawnRequest& req, pid_t parent, bool in_cgroup, const char* exe, char** argv,
                        char** envp, int* staged, int err_fd) {
  int keep[] = {err_fd};
  if (const int err = set_up_child(req, in_cgroup, staged, keep); err != 0) child_fail(keep[0], err);
  err_fd = keep[0];
  // After the switch of user: a change of credentials clears the parent-death signal.
  if (req.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, req.parent_death_signal) != 0) child_fail(err_fd, errno);
    if (::getppid() != parent) ::_exit(127);  // the parent died before the line above: nobody to serve
  }
  // Nothing else of the runtime's (sockets, other instances' pipes) may leak into the app.
  const int first_free = 3 + static_cast<int>(req.inherit_fds.size());
  ::syscall(SYS_close_range, static_cast<unsigned>(first_free), ~0U, CLOSE_RANGE_CLOEXEC);
  if (!req.working_dir.empty() && ::chdir(req.working_dir.c_str()) != 0) child_fail(err_fd, errno);
  ::execve(exe, argv, envp);
  child_fail(err_fd, errno);
}

}  // namespace

int set_up_child(const SpawnRequest& req, bool in_cgroup, int* staged, std::span<int> keep) {
  const int first = 3, count = static_cast<int>(req.inherit_fds.size());
  // What the caller keeps goes above every target first, so that no dup2 below lands on it.
  for (int& fd : keep)
    if ((fd = ::fcntl(fd, F_DUPFD_CLOEXEC, first + count)) < 0) return errno;
  // The parent may block signals (sluice run waits for SIGTERM with sigwait); the app must not inherit that.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
  if (req.own_process_group && ::setpgid(0, 0) != 0) return errno;
  if (!in_cgroup && req.cgroup_procs_fd >= 0 && ::write(req.cgroup_procs_fd, "0", 1) != 1) return errno;
  for (int fd : req.join_procs_fds)
    if (::write(fd, "0", 1) != 1) return errno;
  if (req.netns_fd >= 0 && ::syscall(SYS_setns, req.netns_fd, CLONE_NEWNET) != 0) return errno;
  if (req.ipcns_fd >= 0 && ::syscall(SYS_setns, req.ipcns_fd, CLONE_NEWIPC) != 0) return errno;
  if (req.drop_capabilities) {
    // Every capability the kernel knows, until it answers EINVAL past the last one.
    for (unsigned long cap = 0; ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap)
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return errno;
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  }
  // Raw system calls: glibc's setuid would try to signal threads that exist only in the parent.
  if (req.gid >= 0) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) return errno;
    if (::syscall(SYS_setresgid, req.gid, req.gid, req.gid) != 0) return errno;
  }
  if (req.uid >= 0 && ::syscall(SYS_setresuid, req.uid, req.uid, req.uid) != 0) return errno;
  if (req.drop_capabilities && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  auto onto = [&](int fd, int target, int null_flags) {
    if (fd < 0) fd = ::open("/dev/null", null_flags);
    return fd >= 0 && ::dup2(fd, target) >= 0;
  };
  if (!onto(req.stdin_fd, 0, O_RDONLY) || !onto(req.stdout_fd, 1, O_WRONLY) || !onto(req.stderr_fd, 2, O_WRONLY))
    return errno;
  // The descriptors handed on, onto 3, 4, ...: first each to a number above every target (so that none
  // is overwritten before it is moved), then into place; dup2 leaves the copies open across exec.
  for (int i = 0; i < count; ++i)
    if ((staged[i] = ::fcntl(req.inherit_fds[static_cast<std::size_t>(i)], F_DUPFD_CLOEXEC, first + count)) < 0)
      return errno;
  for (int i = 0; i < count; ++i)
    if (::dup2(staged[i], first + i) < 0) return errno;
  return 0;
}

std::string resolve_executable(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return name;
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

Spawned spawn_process(const SpawnRequest& req) {
  Spawned out;
  if (req.argv.empty()) {
    out.error = "empty command";
    return out;
  }
  std::string path_var = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : req.env)
    if (kv.rfind("PATH=", 0) == 0) path_var = kv.substr(5);
  std::string exe = resolve_executable(req.argv[0], path_var);
  if (exe.empty()) {
    out.error = "exec " + req.argv[0] + ": command not found in PATH";
    return out;
  }
  auto argv = cstrs(req.argv);
  auto envp = cstrs(req.env);
  std::vector<int> staged(req.inherit_fds.size() + 1);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  const pid_t parent = ::getpid();
  bool in_cgroup = false;
  pid_t pid = -1;
  if (req.cgroup_dir_fd >= 0) {
    // fork() semantics (no CLONE_VM, SIGCHLD at exit), born in the cgroup. The child makes only raw
    // system calls before exec, so skipping glibc's fork bookkeeping is safe.
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(req.cgroup_dir_fd);
    pid = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
    in_cgroup = pid >= 0;
  }
  if (pid < 0) pid = ::fork();
  if (pid < 0) {
    out.error = std::string("fork: ") + std::strerror(errno);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    return out;
  }
  if (pid == 0) child(req, parent, in_cgroup, exe.c_str(), argv.data(), envp.data(), staged.data(), err_pipe[1]);
  ::close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    ::waitpid(pid, nullptr, 0);
    out.error = "exec " + req.argv[0] + ": " + std::strerror(child_errno);
    return out;
  }
  // Set in the parent too, so the group exists before anyone signals it (no race with the child).
  ::setpgid(pid, pid);
  out.pid = pid;
  out.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (out.pidfd < 0) {
    out.error = std::string("pidfd_open: ") + std::strerror(errno);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    out.pid = -1;
  }
  return out;
}

}  // namespace sluice::runtime
