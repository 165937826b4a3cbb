// Per-node mode's zygote; see zygote.h.
#include "app/node/zygote.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "app/modes.h"
#include "app/node/messages.h"
#include "app/node/node_socket.h"
#include "app/seqpacket.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sluice::app {
namespace node {
namespace {

constexpr int kSocket = 3;  // the zygote's end, where the agent put it

void reap(int pidfd) {
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED) != 0 && errno == EINTR) {
  }
}

template <typename T>
bool read_whole(int fd, T& value) {
  ssize_t n;
  do n = ::read(fd, &value, sizeof value);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof value);
}

[[noreturn]] void fail(int err_fd, int err) {
  ssize_t ignored = ::write(err_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// The pod's proxy, in the zygote's grandchild: set up, told its set-up worked (err_fd closes), waits until
// the zygote has seen it re-parented to the agent (go_fd), then arms the agent's death signal and runs.
[[noreturn]] void run_proxy(const runtime::SpawnRequest& req, pid_t agent, int* staged, int err_fd, int go_fd) {
  int keep[] = {err_fd, go_fd};
  if (const int err = runtime::set_up_child(req, false, staged, keep); err != 0) fail(keep[0], err);
  // No exec closes what the zygote had open (its socket above all, which spawns as any user): everything
  // past the handed-on descriptors but these two goes, one by one where close_range is not allowed.
  const int first_free = 3 + static_cast<int>(req.inherit_fds.size());
  const auto kept = [&](int fd) { return fd == keep[0] || fd == keep[1]; };
  const int low = std::min(keep[0], keep[1]), high = std::max(keep[0], keep[1]);
  const bool ranged = (low == first_free || ::syscall(SYS_close_range, first_free, low - 1, 0U) == 0) &&
                      (high == low + 1 || ::syscall(SYS_close_range, low + 1, high - 1, 0U) == 0) &&
                      ::syscall(SYS_close_range, high + 1, ~0U, 0U) == 0;
  if (!ranged) {
    std::vector<int> open;
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
      const int fd = std::atoi(it->path().filename().c_str());
      if (fd >= first_free && !kept(fd)) open.push_back(fd);
    }
    if (ec) fail(keep[0], ec.value());
    // In the proxy's process, before it runs: the zygote's descriptors it must not keep, by number, as
    // they were never owned here (the listing's own among them, closed already: harmless).
    for (int fd : open) ::close(fd);
  }
  ::close(keep[0]);  // the set-up worked: the zygote reads end-of-file (its copy is its own, fork_proxy)
  char go = 0;
  if (!read_whole(keep[1], go)) ::_exit(127);  // the zygote went away first
  ::close(keep[1]);  // told to go; this process's copy, never an Fd's (it ends in exit(), never unwinding)
  if (req.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, req.parent_death_signal) != 0 || ::getppid() != agent) ::_exit(127);
  }
  ::prctl(PR_SET_NAME, "sluice-sidecar");  // what ps and top show, its threads too: not the zygote
  ::clearenv();
  for (const auto& kv : req.env) ::putenv(const_cast<char*>(kv.c_str()));
  const int code = run_mode("sidecar", {});
  std::fflush(nullptr);
  std::exit(code);
}

// One proxy, forked through an intermediate that exits at once, so that the agent (a subreaper) adopts it.
std::string fork_proxy(const runtime::SpawnRequest& req, pid_t agent, int& pid, int& pidfd) {
  // Each pipe's ends, [0] read and [1] write: the children's copies are theirs (the proxy closes its own,
  // run_proxy), these the zygote's.
  int raw[2];
  if (::pipe2(raw, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  runtime::Fd err[2] = {runtime::Fd(raw[0]), runtime::Fd(raw[1])};
  if (::pipe2(raw, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  runtime::Fd go[2] = {runtime::Fd(raw[0]), runtime::Fd(raw[1])};
  if (::pipe2(raw, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  runtime::Fd report[2] = {runtime::Fd(raw[0]), runtime::Fd(raw[1])};
  std::vector<int> staged(req.inherit_fds.size() + 1);  // allocated before the fork, as spawn_process does
  std::fflush(nullptr);  // nothing buffered here may be written again by a child
  const pid_t intermediate = ::fork();
  if (intermediate == 0) {
    const pid_t proxy = ::fork();
    if (proxy == 0) run_proxy(req, agent, staged.data(), err[1].get(), go[0].get());
    const int sent = proxy > 0 ? proxy : -errno;
    ::_exit(::write(report[1].get(), &sent, sizeof sent) == static_cast<ssize_t>(sizeof sent) ? 0 : 1);
  }
  const int fork_errno = errno;
  // The children's ends: closed here, so that err and report read end-of-file once the children's copies close.
  err[1] = runtime::Fd();
  go[0] = runtime::Fd();
  report[1] = runtime::Fd();
  const bool reported = intermediate > 0 && read_whole(report[0].get(), pid);
  report[0] = runtime::Fd();
  if (intermediate > 0) ::waitpid(intermediate, nullptr, 0);  // from here on the proxy is the agent's child
  std::string error;
  if (intermediate < 0) error = std::string("fork: ") + std::strerror(fork_errno);
  else if (!reported || pid <= 0) error = std::string("fork: ") + std::strerror(reported ? -pid : EAGAIN);
  if (error.empty()) {
    pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    int child_errno = 0;
    if (read_whole(err[0].get(), child_errno)) error = std::string("set-up: ") + std::strerror(child_errno);
    else if (pidfd < 0) error = std::string("pidfd_open: ") + std::strerror(errno);
    else if (::write(go[1].get(), "g", 1) != 1) error = std::string("write: ") + std::strerror(errno);
  }
  return error;  // go[1] closes: a proxy not told to go ends (127), and is the agent's to reap with the pidfd
}

void serve_request(int socket, pid_t agent, Message m) {
  auto order = decode_spawn_order(std::move(m));
  if (auto* refusal = std::get_if<std::string>(&order)) {
    send_message(socket, encode_spawn_reply(-1, runtime::Fd(), *refusal));
    return;
  }
  int pid = -1, pidfd = -1;
  const std::string error = fork_proxy(std::get<SpawnOrder>(order).request(), agent, pid, pidfd);
  const runtime::Fd proxy(pidfd);
  send_message(socket, encode_spawn_reply(pid, proxy, error));
}  // the order's descriptors close: the proxy has its copies

}  // namespace

bool Zygote::running() const {
  std::lock_guard lock(mu_);
  return static_cast<bool>(socket_);
}

Zygote::~Zygote() {
  if (!socket_) return;
  socket_ = runtime::Fd();  // the zygote's receive ends: it exits
  reap(pidfd_.get());
}

std::string Zygote::start(const std::vector<std::string>& env) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return std::string("socketpair: ") + std::strerror(errno);
  runtime::SpawnRequest req;
  req.argv = {"/proc/self/exe", "node-zygote"};
  req.env = env;
  req.stdout_fd = STDOUT_FILENO;  // what it says goes to the agent's log
  req.stderr_fd = STDERR_FILENO;
  runtime::Fd ours(pair[0]);
  runtime::Fd theirs(pair[1]);
  req.inherit_fds = {theirs.get()};
  req.parent_death_signal = SIGKILL;
  const auto process = runtime::spawn_process(req);
  theirs = runtime::Fd();  // the zygote has its copy (or none runs): ours alone stays
  if (process.pid < 0) return process.error;
  socket_ = std::move(ours);
  pidfd_ = runtime::Fd(process.pidfd);
  return {};
}

runtime::Spawned Zygote::spawn(const runtime::SpawnRequest& req) {
  runtime::Spawned out;
  if (req.netns_fd < 0 || req.stdout_fd < 0 || req.stderr_fd < 0) {
    out.error = "the zygote needs the network namespace, stdout and stderr";
    return out;
  }
  const auto order = encode_spawn_order(req);
  std::lock_guard lock(mu_);
  std::optional<Message> reply;
  if (socket_ && send_message(socket_.get(), order)) reply = receive_message(socket_.get());
  if (!reply) {
    out.error = "the zygote is gone";
    if (socket_) {
      socket_ = runtime::Fd();
      reap(pidfd_.get());
    }
    return out;
  }
  auto spawned = decode_spawn_reply(std::move(*reply));
  if (spawned.error.empty()) {
    out.pid = spawned.pid;
    out.pidfd = spawned.pidfd.release();  // the caller's, as spawn_process's
    return out;
  }
  out.error = std::move(spawned.error);
  if (spawned.pidfd) reap(spawned.pidfd.get());  // a child that began and ended
  return out;
}

}  // namespace node

int run_node_zygote(Args) {
  // Started by the agent with its socket on descriptor 3; serves it until the agent closes it.
  const pid_t agent = ::getppid();
  ::prctl(PR_SET_NAME, "sluice-zygote");
  while (auto m = receive_message(node::kSocket)) node::serve_request(node::kSocket, agent, std::move(*m));
  return 0;
}

}  // namespace sluice::app
