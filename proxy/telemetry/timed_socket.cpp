// TimedSocket; see timed_socket.h. Non-blocking descriptor plus poll(2) against the deadline.
#include "proxy/telemetry/timed_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::proxy::telemetry {

TimedSocket::~TimedSocket() { close(); }

void TimedSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool TimedSocket::wait(short events, ExportClock::time_point deadline, std::string& error) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - ExportClock::now()).count();
    if (left <= 0) {
      error = "timed out";
      return false;
    }
    pollfd p{.fd = fd_, .events = events, .revents = 0};
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) {
      error = std::strerror(errno);
      return false;
    }
  }
}

bool TimedSocket::connect(const std::string& host, std::uint16_t port, ExportClock::time_point deadline,
                          std::string& error) {
  close();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // getaddrinfo does not take a deadline; it runs on the export thread only.
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    error = std::string("resolve ") + host + ": " + ::gai_strerror(rc);
    return false;
  }
  for (auto* a = found; a; a = a->ai_next) {
    fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd_ < 0) continue;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = ::connect(fd_, a->ai_addr, a->ai_addrlen);
    if (rc == 0 || (errno == EINPROGRESS && wait(POLLOUT, deadline, error))) {
      int so_error = 0;
      socklen_t len = sizeof so_error;
      ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error == 0) {
        ::freeaddrinfo(found);
        return true;
      }
      error = std::strerror(so_error);
    } else if (rc != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
    }
    close();
  }
  ::freeaddrinfo(found);
  if (error.empty()) error = "no address for " + host;
  return false;
}

bool TimedSocket::write_all(std::string_view data, ExportClock::time_point deadline, std::string& error) {
  while (!data.empty()) {
    auto n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait(POLLOUT, deadline, error)) return false;
      continue;
    }
    error = n < 0 ? std::strerror(errno) : "connection closed";
    return false;
  }
  return true;
}

long TimedSocket::read_some(char* buf, std::size_t size, ExportClock::time_point deadline, std::string& error) {
  while (true) {
    auto n = ::recv(fd_, buf, size, 0);
    if (n >= 0) return static_cast<long>(n);
    if (errno != EAGAIN && errno != EINTR) {
      error = std::strerror(errno);
      return -1;
    }
    if (!wait(POLLIN, deadline, error)) return -1;
  }
}

}  // namespace sluice::proxy::telemetry
