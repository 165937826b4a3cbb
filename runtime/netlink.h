// A minimal rtnetlink client: the few link and address requests a pod network needs, each one round trip.
// Direct netlink rather than `ip`: a sandbox needs about eight requests, and eight fork/execs of `ip` would
// cost more than the whole 5 ms budget a sandbox may add to a cold start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sluice::runtime::netlink {

class Socket {
 public:
  // A NETLINK_ROUTE socket in the calling thread's network namespace; check ok() (error() says why not).
  Socket();
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

  // A veth pair: `name` here, `peer` created directly in the network namespace `peer_netns_fd`.
  bool create_veth(const std::string& name, const std::string& peer, int peer_netns_fd);
  std::optional<int> link_index(const std::string& name);
  bool set_up(const std::string& name);
  // IPv4 `address`/`prefix` (host byte order) on the link with `index`.
  bool add_ipv4(int index, std::uint32_t address, int prefix);
  // Deletes a link (for a veth: both ends). True as well when there was no such link.
  bool delete_link(const std::string& name);

 private:
  // Sends one request (sequence number filled in here) and reads its acknowledgement; false with error_.
  bool transact(void* msg, std::uint32_t len, const char* what);

  int fd_ = -1;
  std::uint32_t seq_ = 0;
  std::string error_;
};

}  // namespace sluice::runtime::netlink
