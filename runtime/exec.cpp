// run_captured: poll(2) on the capture pipe and the child's pidfd, so a command that closes its output
// early or keeps it open in a background child still ends at its exit or the deadline.
#include "runtime/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::runtime {

ExecResult run_captured(SpawnRequest req, std::chrono::milliseconds timeout, std::size_t max_output) {
  ExecResult result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  req.stdout_fd = pipe_fds[1];
  req.stderr_fd = pipe_fds[1];
  auto spawned = spawn_process(req);
  ::close(pipe_fds[1]);
  if (spawned.pid < 0) {
    ::close(pipe_fds[0]);
    result.error = spawned.error;
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool exited = false, open = true;
  while (!exited) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-spawned.pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{spawned.pidfd, POLLIN, 0}, {open ? pipe_fds[0] : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      char buf[4096];
      ssize_t got = ::read(pipe_fds[0], buf, sizeof buf);
      if (got > 0) {
        auto keep = std::min(static_cast<std::size_t>(got), max_output - std::min(max_output, result.output.size()));
        result.output.append(buf, keep);
      } else if (got == 0 || errno != EINTR) {
        open = false;
      }
    }
    if (fds[0].revents & POLLIN) exited = true;
  }
  // What the command wrote just before exiting is still in the pipe: drain without blocking.
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  char buf[4096];
  ssize_t got;
  while (open && (got = ::read(pipe_fds[0], buf, sizeof buf)) > 0) {
    auto keep = std::min(static_cast<std::size_t>(got), max_output - std::min(max_output, result.output.size()));
    result.output.append(buf, keep);
  }
  ::close(pipe_fds[0]);
  ::close(spawned.pidfd);
  int status = 0;
  while (::waitpid(spawned.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace sluice::runtime
