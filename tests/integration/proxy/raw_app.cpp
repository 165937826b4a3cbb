#include "raw_app.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace sluice::test {

RawApp::RawApp(std::string response, bool close_after) : response_(std::move(response)), close_after_(close_after) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe(stop_pipe_) != 0)
    throw std::runtime_error("RawApp: cannot listen");
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

RawApp::~RawApp() {
  char c = 0;
  (void)!::write(stop_pipe_[1], &c, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

void RawApp::set_response(std::string response, bool close_after) {
  std::lock_guard lock(mu_);
  response_ = std::move(response);
  close_after_ = close_after;
}

std::string RawApp::received() {
  std::lock_guard lock(mu_);
  return received_;
}
std::size_t RawApp::connections() {
  std::lock_guard lock(mu_);
  return connections_;
}
std::size_t RawApp::requests() {
  std::lock_guard lock(mu_);
  return requests_;
}
std::size_t RawApp::closed_by_peer() {
  std::lock_guard lock(mu_);
  return closed_by_peer_;
}

void RawApp::run() {
  struct Conn {
    int fd;
    std::string pending;  // bytes after the last answered head
  };
  std::vector<Conn> conns;
  while (true) {
    std::vector<pollfd> fds = {{stop_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& c : conns) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 1000) < 0) continue;
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd >= 0) {
        conns.push_back({fd, {}});
        std::lock_guard lock(mu_);
        ++connections_;
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto& c = conns[i - 2];
      char buf[65536];
      auto n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n <= 0) {
        ::close(c.fd);
        c.fd = -1;
        std::lock_guard lock(mu_);
        ++closed_by_peer_;
        continue;
      }
      c.pending.append(buf, static_cast<std::size_t>(n));
      {
        std::lock_guard lock(mu_);
        received_.append(buf, static_cast<std::size_t>(n));
      }
      std::size_t end;
      while (c.fd >= 0 && (end = c.pending.find("\r\n\r\n")) != std::string::npos) {
        // A chunked request is answered once its last chunk came, as an app that reads its body does.
        std::size_t request_end = end + 4;
        if (c.pending.substr(0, end).find("chunked") != std::string::npos) {
          if (c.pending.compare(request_end, 5, "0\r\n\r\n") == 0) {
            request_end += 5;
          } else {
            auto last = c.pending.find("\r\n0\r\n\r\n", request_end);
            if (last == std::string::npos) break;
            request_end = last + 7;
          }
        }
        c.pending.erase(0, request_end);
        std::string response;
        bool close_after;
        {
          std::lock_guard lock(mu_);
          ++requests_;
          response = response_;
          close_after = close_after_;
        }
        (void)!::send(c.fd, response.data(), response.size(), MSG_NOSIGNAL);
        if (close_after) {
          ::close(c.fd);
          c.fd = -1;
        }
      }
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
  }
  for (auto& c : conns) ::close(c.fd);
}

}  // namespace sluice::test
