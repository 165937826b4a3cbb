// A network namespace to make sockets in. A socket belongs for good to the namespace it was made in,
// whichever thread later uses it: so a proxy on the host can listen on a pod's ports and reach the pod's
// 127.0.0.1 by making those sockets inside the pod's namespace, and serve them from its own threads (the
// basis of per-node mode, where one sluice serves every pod of a node). The default is the namespace the
// calling thread is in, and costs nothing.
#pragma once

#include <memory>
#include <string>

#include "common/net.h"

namespace sluice::net {

class Netns {
 public:
  Netns() = default;  // the calling thread's own
  // A namespace by its file: /proc/PID/ns/net, /run/netns/NAME. Throws std::system_error naming `path`.
  static Netns open(const std::string& path);

  bool own() const { return !fd_; }
  const std::string& path() const { return path_; }

  // socket(2) inside: the calling thread enters the namespace, makes the socket and returns to its own
  // (two setns(2) calls; they need CAP_SYS_ADMIN). -1 with `ec` set on failure.
  int make_socket(int domain, int type, int protocol, error_code& ec) const;

  // Opens an Asio socket or acceptor for `protocol` inside.
  template <class Socket, class Protocol>
  void open(Socket& socket, const Protocol& protocol, error_code& ec) const {
    if (own()) {
      socket.open(protocol, ec);
      return;
    }
    const int fd = make_socket(protocol.family(), protocol.type(), protocol.protocol(), ec);
    if (fd >= 0) socket.assign(protocol, fd, ec);
  }

 private:
  std::shared_ptr<const int> fd_;  // closed with the last copy
  std::string path_;
};

}  // namespace sluice::net
