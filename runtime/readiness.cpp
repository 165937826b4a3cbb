// Readiness polling with plain non-blocking sockets: it runs before any event loop may exist for the instance.
#include "runtime/readiness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "runtime/fd.h"

namespace sluice::runtime {
namespace {

using Steady = std::chrono::steady_clock;

int remaining_ms(Steady::time_point until) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Steady::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

bool wait_fd(int fd, short events, Steady::time_point until) {
  pollfd p{fd, events, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, remaining_ms(until));
  } while (rc < 0 && errno == EINTR);
  return rc > 0;
}

bool fail(std::string& error, const std::string& what, int err) {
  error = what + ": " + std::strerror(err);
  return false;
}

}  // namespace

bool probe_once(const ReadinessProbe& probe, std::string& error) {
  auto until = Steady::now() + probe.try_timeout;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(probe.port);
  if (int rc = ::getaddrinfo(probe.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error = "resolve " + probe.host + ": " + ::gai_strerror(rc);
    return false;
  }
  Fd sock(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int rc = sock.get() < 0 ? -1 : ::connect(sock.get(), res->ai_addr, res->ai_addrlen);
  int err = errno;
  ::freeaddrinfo(res);
  if (sock.get() < 0) return fail(error, "socket", err);
  if (rc != 0 && err != EINPROGRESS) return fail(error, "connect", err);
  if (rc != 0) {
    if (!wait_fd(sock.get(), POLLOUT, until)) {
      error = "connect: timed out";
      return false;
    }
    socklen_t len = sizeof err;
    ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail(error, "connect", err);
  }
  if (probe.http_path.empty()) return true;
  std::string req = "GET " + probe.http_path + " HTTP/1.1\r\nHost: " + probe.host + ":" + port +
                    "\r\nUser-Agent: kube-probe//\r\nConnection: close\r\n\r\n";
  if (::send(sock.get(), req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return fail(error, "send", errno);
  std::string head;
  char buf[512];
  while (head.find("\r\n") == std::string::npos) {
    if (!wait_fd(sock.get(), POLLIN, until)) {
      error = "http: no status line within " + std::to_string(probe.try_timeout.count()) + " ms";
      return false;
    }
    ssize_t n = ::recv(sock.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      error = "http: connection closed before a status line";
      return false;
    }
    head.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.1 200 OK": the code sits after the first space.
  auto sp = head.find(' ');
  int code = sp == std::string::npos ? 0 : std::atoi(head.c_str() + sp + 1);
  if (code >= 200 && code < 400) return true;
  error = "http: status " + std::to_string(code);
  return false;
}

ReadinessResult wait_ready(const ReadinessProbe& probe, Steady::time_point deadline, std::stop_token stop,
                           const std::function<bool()>& give_up) {
  ReadinessResult result;
  auto began = Steady::now();
  std::mutex mu;
  std::condition_variable_any cv;
  auto finish = [&](Readiness r) {
    result.outcome = r;
    result.waited = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - began);
    return result;
  };
  while (true) {
    if (stop.stop_requested()) return finish(Readiness::cancelled);
    if (give_up && give_up()) return finish(Readiness::gave_up);
    auto next = Steady::now() + probe.period;
    ++result.attempts;
    if (probe_once(probe, result.last_error)) return finish(Readiness::ready);
    if (Steady::now() >= deadline) return finish(Readiness::deadline);
    std::unique_lock lock(mu);
    // Wakes at once on cancellation instead of finishing the period.
    cv.wait_until(lock, stop, std::min(next, deadline), [] { return false; });
  }
}

}  // namespace sluice::runtime
