// The join protocol's messages; see join.h.
#include "app/node/join.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::app::node {

bool send_message(int socket, std::string_view text, int fd) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (true) {
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n) == text.size();
    if (errno != EINTR) return false;
  }
}

std::optional<Message> receive_message(int socket) {
  std::string buffer(kMaxMessageBytes, '\0');
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  Message m;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&m.fd, CMSG_DATA(c), sizeof(int));
  if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    if (m.fd >= 0) ::close(m.fd);
    return std::nullopt;
  }
  buffer.resize(static_cast<std::size_t>(n));
  m.text = std::move(buffer);
  return m;
}

std::string join_text(const std::vector<std::string>& env) {
  std::string out = "join\n";
  for (const auto& kv : env) {
    if (kv.find('\n') != std::string::npos) continue;  // a value over lines cannot be a Knative setting
    out += kv;
    out += '\n';
  }
  return out;
}

std::optional<std::vector<std::string>> parse_join(std::string_view text) {
  constexpr std::string_view kHead = "join\n";
  if (text.substr(0, kHead.size()) != kHead) return std::nullopt;
  text.remove_prefix(kHead.size());
  std::vector<std::string> env;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    if (line.find('=') == std::string_view::npos) return std::nullopt;
    env.emplace_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return env;
}

}  // namespace sluice::app::node
