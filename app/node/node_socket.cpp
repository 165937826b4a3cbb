// See node_socket.h.
#include "app/node/node_socket.h"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "app/node/join.h"
#include "app/options.h"
#include "common/config_error.h"

namespace sluice::app::node {

std::optional<std::string> socket_option(Args args, std::string_view mode) {
  Options o({{"SLUICE_NODE_SOCKET", "socket", false,
              "the agent's unix socket, where pods join (default /run/sluice/node.sock)"}},
            process_env(), args);
  if (o.help_requested()) {
    std::fputs(o.help_text(mode).c_str(), stdout);
    return std::nullopt;
  }
  return o.get_string("SLUICE_NODE_SOCKET", kDefaultSocket);
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    throw ConfigError("SLUICE_NODE_SOCKET=\"" + path + "\": longer than a unix socket path may be");
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
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

std::string after(const std::string& text, std::string_view word) {
  if (text.size() <= word.size()) return {};
  std::string rest = text.substr(word.size() + 1);
  if (!rest.empty() && rest.back() == '\n') rest.pop_back();
  return rest;
}

}  // namespace sluice::app::node
