// Sockets made in another network namespace; see netns.h.
#include "common/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "common/log.h"

namespace sluice::net {
namespace {

error_code last_error() { return error_code(errno, asio::error::get_system_category()); }

// The namespace this thread started in, to come back to (opened once per thread, kept for its life).
int home_namespace() {
  struct Home {
    int fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    ~Home() {
      if (fd >= 0) ::close(fd);
    }
  };
  thread_local Home home;
  return home.fd;
}

}  // namespace

Netns Netns::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "network namespace " + path);
  Netns ns;
  ns.fd_ = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
  ns.path_ = path;
  return ns;
}

int Netns::make_socket(int domain, int type, int protocol, error_code& ec) const {
  ec = {};
  if (own()) {
    const int fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) ec = last_error();
    return fd;
  }
  const int home = home_namespace();
  if (home < 0) {
    ec = last_error();
    return -1;
  }
  if (::setns(*fd_, CLONE_NEWNET) != 0) {
    ec = last_error();
    return -1;
  }
  const int fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
  const error_code made = fd < 0 ? last_error() : error_code{};
  if (::setns(home, CLONE_NEWNET) != 0) {
    // Every later socket of this thread would land in the pod: nothing sane can go on.
    log::error("could not return to this thread's network namespace").kv("errno", static_cast<std::int64_t>(errno));
    std::abort();
  }
  ec = made;
  return fd;
}

}  // namespace sluice::net
