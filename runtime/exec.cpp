// run_captured and run_lines: poll(2) on the capture pipe and the child's pidfd, so a command that closes its output
// early or keeps it open in a background child still ends at its exit or the deadline.
#include "runtime/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "runtime/line_splitter.h"

extern char** environ;

namespace sluice::runtime {

namespace {

// Spawns `req` with stdout and stderr on one pipe, hands what it writes to `take` as it comes, and
// SIGKILLs the process group at `timeout`; returns how it ended (output left empty).
ExecResult run_piped(SpawnRequest req, std::chrono::milliseconds timeout,
                     const std::function<void(std::string_view)>& take) {
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
  const pid_t kill_target = req.own_process_group ? -spawned.pid : spawned.pid;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool exited = false, open = true;
  char buf[4096];
  while (!exited) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(kill_target, SIGKILL);
      break;
    }
    pollfd fds[2] = {{spawned.pidfd, POLLIN, 0}, {open ? pipe_fds[0] : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), INT32_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      ssize_t got = ::read(pipe_fds[0], buf, sizeof buf);
      if (got > 0) take(std::string_view(buf, static_cast<std::size_t>(got)));
      else if (got == 0 || errno != EINTR) open = false;
    }
    if (fds[0].revents & POLLIN) exited = true;
  }
  // What the command wrote just before exiting is still in the pipe: drain without blocking.
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  ssize_t got;
  while (open && (got = ::read(pipe_fds[0], buf, sizeof buf)) > 0) take(std::string_view(buf, static_cast<std::size_t>(got)));
  ::close(pipe_fds[0]);
  ::close(spawned.pidfd);
  int status = 0;
  while (::waitpid(spawned.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace

ExecResult run_captured(SpawnRequest req, std::chrono::milliseconds timeout, std::size_t max_output) {
  std::string output;
  auto result = run_piped(std::move(req), timeout, [&](std::string_view chunk) {
    output.append(chunk.substr(0, max_output - std::min(max_output, output.size())));
  });
  result.output = std::move(output);
  return result;
}

ExecResult run_lines(SpawnRequest req, std::chrono::milliseconds timeout,
                     const std::function<void(std::string_view)>& on_line) {
  LineSplitter lines;
  auto result = run_piped(std::move(req), timeout, [&](std::string_view chunk) { lines.feed(chunk, on_line); });
  lines.finish(on_line);
  return result;
}

int run_helper(const std::vector<std::string>& argv, std::string& output) {
  SpawnRequest req;
  req.argv = argv;
  for (char** e = environ; *e; ++e) req.env.emplace_back(*e);
  auto result = run_captured(std::move(req), kHelperTimeout);
  output = result.error.empty() ? std::move(result.output) : result.error;
  return result.error.empty() && !result.timed_out && result.signal == 0 ? result.exit_code : -1;
}

}  // namespace sluice::runtime
