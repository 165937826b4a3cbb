// See node_socket.h.
#include "app/node/node_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "app/node/join.h"
#include "app/options.h"
#include "runtime/fd.h"
#include "common/config_error.h"

namespace sluice::app::node {

std::optional<std::string> socket_option(Args args, std::string_view mode) {
  Options o({{"SLUICE_NODE_SOCKET", "socket", false,
              "the pod's own socket to the node agent, in the pod's sluice volume (default /run/sluice/node.sock)"}},
            process_env(), args);
  if (o.help_requested()) {
    std::fputs(o.help_text(mode).c_str(), stdout);
    return std::nullopt;
  }
  return o.get_string("SLUICE_NODE_SOCKET", kDefaultSocket);
}

namespace {

// `op` on the address of `path`, through its directory when the path is too long for one.
template <typename Op>
int at_unix_path(const std::string& path, Op op) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() < sizeof a.sun_path) {
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return op(a);
  }
  const auto slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash), name = path.substr(slash + 1);
  int result = -1, saved = 0;
  {
    const runtime::Fd fd(slash == std::string::npos ? -1 : ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) {
      if (slash == std::string::npos) errno = ENAMETOOLONG;
      return -1;
    }
    const std::string via = "/proc/self/fd/" + std::to_string(fd.get()) + "/" + name;
    if (via.size() >= sizeof a.sun_path) {
      errno = ENAMETOOLONG;
    } else {
      std::memcpy(a.sun_path, via.c_str(), via.size() + 1);
      result = op(a);
    }
    saved = errno;
  }  // the directory closes
  errno = saved;  // op's, for the caller
  return result;
}

}  // namespace

int unix_connect(int socket, const std::string& path) {
  return at_unix_path(path, [&](const sockaddr_un& a) {
    return ::connect(socket, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  });
}

int unix_bind(int socket, const std::string& path) {
  return at_unix_path(path, [&](const sockaddr_un& a) {
    return ::bind(socket, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  });
}

int unix_listen_in_place(const std::string& path, mode_t mode) {
  const auto slash = path.rfind('/');
  const std::string temporary = path.substr(0, slash + 1) + "." + path.substr(slash + 1);
  ::unlink(temporary.c_str());
  int err = 0;
  {
    runtime::Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd && unix_bind(fd.get(), temporary) == 0 && ::chmod(temporary.c_str(), mode) == 0 && ::listen(fd.get(), 16) == 0 &&
        ::rename(temporary.c_str(), path.c_str()) == 0)
      return fd.release();  // the caller's
    err = errno;
  }  // the socket closes
  ::unlink(temporary.c_str());
  errno = err;
  return -1;
}

int signal_descriptor() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return ::signalfd(-1, &set, SFD_CLOEXEC);
}

int wait_readable(std::vector<int> fds, int timeout_ms) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  while (true) {
    const int n = ::poll(p.data(), p.size(), timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p[i].revents) return static_cast<int>(i);
    return -1;
  }
}

}  // namespace sluice::app::node
