// rtnetlink requests built by hand into an aligned buffer: the wire format is the kernel's (netlink(7),
// rtnetlink(7)); the attribute nesting for a veth peer follows veth's IFLA_INFO_DATA / VETH_INFO_PEER.
#include "runtime/netlink.h"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace sluice::runtime::netlink {
namespace {

// One request: header, family header, then attributes; nests patch their length when closed.
class Message {
 public:
  Message(std::uint16_t type, std::uint16_t flags) {
    buf_.resize(NLMSG_HDRLEN);
    auto* h = header();
    h->nlmsg_type = type;
    h->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
  }
  template <typename T>
  void body(const T& t) { append(&t, sizeof t); }
  void attr(std::uint16_t type, const void* data, std::size_t len) {
    rtattr a{};
    a.rta_type = type;
    a.rta_len = static_cast<std::uint16_t>(RTA_LENGTH(len));
    append(&a, sizeof a);
    append(data, len);
  }
  void attr_str(std::uint16_t type, const std::string& s) { attr(type, s.c_str(), s.size() + 1); }
  void attr_u32(std::uint16_t type, std::uint32_t v) { attr(type, &v, sizeof v); }
  std::size_t open(std::uint16_t type) {
    std::size_t at = buf_.size();
    attr(type, nullptr, 0);
    return at;
  }
  void close(std::size_t at) {
    auto* a = reinterpret_cast<rtattr*>(buf_.data() + at);
    a->rta_len = static_cast<std::uint16_t>(buf_.size() - at);
  }
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  std::uint32_t size() {
    header()->nlmsg_len = static_cast<std::uint32_t>(buf_.size());
    return static_cast<std::uint32_t>(buf_.size());
  }

 private:
  void append(const void* data, std::size_t len) {
    std::size_t at = buf_.size();
    buf_.resize(at + NLMSG_ALIGN(len), 0);
    if (len) std::memcpy(buf_.data() + at, data, len);
  }
  std::vector<char> buf_;
};

}  // namespace

Socket::Socket() {
  fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd_ < 0) {
    error_ = std::string("netlink socket: ") + std::strerror(errno);
    return;
  }
  // The kernel answers at once; a bound keeps a wedged request from hanging a sandbox's creation.
  timeval timeout{5, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    error_ = std::string("netlink bind: ") + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
  }
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

bool Socket::transact(void* msg, std::uint32_t len, const char* what) {
  auto* h = static_cast<nlmsghdr*>(msg);
  h->nlmsg_seq = ++seq_;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd_, msg, len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    error_ = std::string(what) + ": send: " + std::strerror(errno);
    return false;
  }
  alignas(nlmsghdr) char buf[8192];
  while (true) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = std::string(what) + ": recv: " + std::strerror(errno);
      return false;
    }
    auto left = static_cast<int>(n);
    for (auto* r = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(r, left); r = NLMSG_NEXT(r, left)) {
      if (r->nlmsg_seq != seq_) continue;
      if (r->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(r));
        if (e->error == 0) return true;
        error_ = std::string(what) + ": " + std::strerror(-e->error);
        errno = -e->error;
        return false;
      }
    }
  }
}

bool Socket::create_veth(const std::string& name, const std::string& peer, int peer_netns_fd) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  m.body(ifi);
  m.attr_str(IFLA_IFNAME, name);
  auto info = m.open(IFLA_LINKINFO);
  m.attr_str(IFLA_INFO_KIND, "veth");
  auto data = m.open(IFLA_INFO_DATA);
  auto peer_at = m.open(VETH_INFO_PEER);
  m.body(ifi);  // the peer's own ifinfomsg, then its attributes
  m.attr_str(IFLA_IFNAME, peer);
  m.attr_u32(IFLA_NET_NS_FD, static_cast<std::uint32_t>(peer_netns_fd));
  m.close(peer_at);
  m.close(data);
  m.close(info);
  auto len = m.size();
  return transact(m.header(), len, ("create veth " + name).c_str());
}

std::optional<int> Socket::link_index(const std::string& name) {
  Message m(RTM_GETLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  m.body(ifi);
  m.attr_str(IFLA_IFNAME, name);
  ifinfomsg reply{};
  auto len = m.size();
  // A GETLINK answers with the link and no acknowledgement: read until the reply arrives.
  m.header()->nlmsg_flags = NLM_F_REQUEST;
  m.header()->nlmsg_seq = ++seq_;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd_, m.header(), len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    error_ = "get link " + name + ": send: " + std::strerror(errno);
    return std::nullopt;
  }
  alignas(nlmsghdr) char buf[8192];
  while (true) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = "get link " + name + ": recv: " + std::strerror(errno);
      return std::nullopt;
    }
    auto left = static_cast<int>(n);
    for (auto* r = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(r, left); r = NLMSG_NEXT(r, left)) {
      if (r->nlmsg_seq != seq_) continue;
      if (r->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(r));
        error_ = "get link " + name + ": " + std::strerror(-e->error);
        return std::nullopt;
      }
      if (r->nlmsg_type == RTM_NEWLINK && r->nlmsg_len >= NLMSG_LENGTH(sizeof reply)) {
        std::memcpy(&reply, NLMSG_DATA(r), sizeof reply);
        return reply.ifi_index;
      }
    }
  }
}

bool Socket::set_up(const std::string& name) {
  Message m(RTM_NEWLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_flags = IFF_UP;
  ifi.ifi_change = IFF_UP;
  m.body(ifi);
  m.attr_str(IFLA_IFNAME, name);
  auto len = m.size();
  return transact(m.header(), len, ("set " + name + " up").c_str());
}

bool Socket::add_ipv4(int index, std::uint32_t address, int prefix) {
  Message m(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  ifa.ifa_prefixlen = static_cast<unsigned char>(prefix);
  ifa.ifa_index = static_cast<unsigned>(index);
  m.body(ifa);
  std::uint32_t be = htonl(address);
  m.attr(IFA_LOCAL, &be, sizeof be);
  m.attr(IFA_ADDRESS, &be, sizeof be);
  auto len = m.size();
  return transact(m.header(), len, "add address");
}

bool Socket::delete_link(const std::string& name) {
  Message m(RTM_DELLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  m.body(ifi);
  m.attr_str(IFLA_IFNAME, name);
  auto len = m.size();
  if (transact(m.header(), len, ("delete link " + name).c_str())) return true;
  return errno == ENODEV;
}

}  // namespace sluice::runtime::netlink
