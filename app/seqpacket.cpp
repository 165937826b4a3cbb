// Messages with descriptors over SOCK_SEQPACKET; see seqpacket.h.
#include "app/seqpacket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sluice::app {

bool send_message(int socket, std::string_view text, std::span<const int> fds) {
  if (fds.size() > kMaxDescriptors) return false;
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptors)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n) == text.size();
    if (errno != EINTR) return false;
  }
}

std::optional<Message> receive_message(int socket) {
  // The message's size first (MSG_PEEK | MSG_TRUNC: the whole datagram's length; nothing is taken, and with
  // no room for control data no descriptor is received), then a room of exactly that size. A room of the
  // largest size for every receive, even untouched, left each pod's thread a share of 256 KiB-high arenas
  // in the agent.
  char probe;
  ssize_t size;
  do size = ::recv(socket, &probe, 1, MSG_PEEK | MSG_TRUNC);
  while (size < 0 && errno == EINTR);
  if (size <= 0) return std::nullopt;  // closed (this protocol sends no empty message)
  Message m;
  m.text.resize(std::min(static_cast<std::size_t>(size), kMaxMessageBytes));
  iovec iov{m.text.data(), m.text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptors)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  for (cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      m.fds.emplace_back(fd);
    }
  }
  if (n <= 0 || static_cast<std::size_t>(n) != m.text.size() || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    m.close_fds();  // larger than any message may be, or cut
    return std::nullopt;
  }
  return m;
}

std::vector<int> borrow(std::span<const runtime::Fd> fds) {
  std::vector<int> out;
  out.reserve(fds.size());
  for (const auto& fd : fds) out.push_back(fd.get());
  return out;
}

}  // namespace sluice::app
