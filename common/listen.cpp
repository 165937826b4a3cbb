// Listening sockets; see listen.h.
#include "common/listen.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>

namespace sluice::net {
namespace {

using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

[[noreturn]] void fail(const boost::system::system_error& e, const tcp::endpoint& ep, const std::string& listener) {
  if (e.code() == asio::error::address_in_use) throw AddressInUse(ep, listener);
  throw std::system_error(e.code(), listener + " listener on " + endpoint_text(ep));
}

// The process's listening sockets: those a predecessor handed over and nobody took yet, and those taken
// or opened since.
struct Listeners {
  std::mutex mu;
  std::vector<int> inherited;
  std::vector<int> held;
};

Listeners& listeners() {
  static Listeners l;
  return l;
}

std::optional<tcp::endpoint> bound_to(int fd) {
  sockaddr_storage a{};
  socklen_t size = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) != 0) return std::nullopt;
  tcp::endpoint ep;
  if (size > ep.capacity()) return std::nullopt;
  std::memcpy(ep.data(), &a, size);
  ep.resize(size);
  return ep;
}

// The inherited listener bound to `ep`, removed from the pool; -1 when there is none.
int take_inherited(const tcp::endpoint& ep) {
  if (ep.port() == 0) return -1;
  auto& l = listeners();
  std::lock_guard lock(l.mu);
  const auto it = std::find_if(l.inherited.begin(), l.inherited.end(), [&](int fd) { return bound_to(fd) == ep; });
  if (it == l.inherited.end()) return -1;
  const int fd = *it;
  l.inherited.erase(it);
  return fd;
}

bool inherited(const tcp::endpoint& ep) {
  auto& l = listeners();
  std::lock_guard lock(l.mu);
  return std::any_of(l.inherited.begin(), l.inherited.end(), [&](int fd) { return bound_to(fd) == ep; });
}

void hold(int fd) {
  auto& l = listeners();
  std::lock_guard lock(l.mu);
  // Once per descriptor number: a process that opens and closes listeners all day (the gateway) keeps as
  // many entries as numbers it ever used.
  if (std::find(l.held.begin(), l.held.end(), fd) == l.held.end()) l.held.push_back(fd);
}

// Classic BPF over a TCP segment (a socket filter sees it from the TCP header on): accept everything but a
// segment whose SYN is set and ACK is not.
constexpr unsigned kTcpFlagsOffset = 13;
constexpr unsigned kSyn = 0x02, kAck = 0x10;
constexpr std::array<sock_filter, 5> kDropNewHandshakes{{
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kTcpFlagsOffset),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, kSyn | kAck),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kSyn, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, 0),            // drop
    BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),  // keep the whole segment
}};

}  // namespace

AddressInUse::AddressInUse(const tcp::endpoint& ep, const std::string& listener)
    : std::runtime_error("address already in use: " + endpoint_text(ep) + " (" + listener + " listener)") {}

std::string endpoint_text(const tcp::endpoint& ep) {
  auto port = std::to_string(ep.port());
  return ep.address().is_v6() ? "[" + ep.address().to_string() + "]:" + port : ep.address().to_string() + ":" + port;
}

std::uint16_t open_listener(tcp::acceptor& acceptor, const tcp::endpoint& ep, const std::string& listener,
                            bool share_with_own_workers, const Netns& netns) {
  try {
    if (const int fd = take_inherited(ep); fd >= 0) {
      const int unused = 0;  // the kernel wants an int's worth of option, and reads none
      (void)::setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused);  // ENOENT: it had none
      acceptor.assign(ep.protocol(), fd);
      hold(fd);
      return ep.port();
    }
    error_code opened;
    netns.open(acceptor, ep.protocol(), opened);
    if (opened) throw boost::system::system_error(opened);
    // SO_REUSEADDR: a restart binds while the previous process's connections sit in TIME_WAIT. It never
    // lets two listening sockets share a port on Linux.
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    if (share_with_own_workers) acceptor.set_option(reuse_port(true));
    if (ep.address().is_v6()) acceptor.set_option(asio::ip::v6_only(false));
    acceptor.bind(ep);
    acceptor.listen(asio::socket_base::max_listen_connections);
    hold(acceptor.native_handle());
    return acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    error_code ignore;
    acceptor.close(ignore);
    fail(e, ep, listener);
  }
}

std::string any_address(const Netns& netns) {
  // A dual-stack socket bound to [::]:0 proves both that IPv6 is there (no ipv6.disable=1, no
  // EAFNOSUPPORT in this network namespace) and that it accepts IPv4 as mapped addresses.
  asio::io_context io;
  tcp::acceptor probe(io);
  error_code ec;
  netns.open(probe, tcp::v6(), ec);
  if (!ec) probe.set_option(asio::ip::v6_only(false), ec);
  if (!ec) probe.bind(tcp::endpoint(tcp::v6(), 0), ec);
  return ec ? "0.0.0.0" : "::";
}

void claim_port(const tcp::endpoint& ep, const std::string& listener, const Netns& netns) {
  if (ep.port() == 0 || inherited(ep)) return;
  asio::io_context io;
  tcp::acceptor probe(io);
  try {
    error_code opened;
    netns.open(probe, ep.protocol(), opened);
    if (opened) throw boost::system::system_error(opened);
    probe.set_option(tcp::acceptor::reuse_address(true));
    if (ep.address().is_v6()) probe.set_option(asio::ip::v6_only(false));
    probe.bind(ep);
  } catch (const boost::system::system_error& e) {
    fail(e, ep, listener);
  }
}

bool refuse_new_handshakes(tcp::acceptor& acceptor) {
  if (!acceptor.is_open()) return false;
  auto code = kDropNewHandshakes;  // the kernel copies it
  sock_fprog program{.len = code.size(), .filter = code.data()};
  return ::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program) == 0;
}

void inherit_listeners(const std::vector<int>& fds) {
  auto& l = listeners();
  std::lock_guard lock(l.mu);
  for (int fd : fds) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // a child this process starts gets none of them by accident
    l.inherited.push_back(fd);
  }
}

std::size_t close_unclaimed_listeners() {
  auto& l = listeners();
  std::lock_guard lock(l.mu);
  for (int fd : l.inherited) ::close(fd);
  return std::exchange(l.inherited, {}).size();
}

std::vector<int> listening_descriptors() {
  auto& l = listeners();
  std::lock_guard lock(l.mu);
  // A descriptor closed since (a listener of a gateway's revision gone) no longer listens, or is another
  // socket by now: only those still listening, once each.
  std::vector<int> out;
  for (int fd : l.held) {
    int listening = 0;
    socklen_t size = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening &&
        std::find(out.begin(), out.end(), fd) == out.end())
      out.push_back(fd);
  }
  return out;
}

}  // namespace sluice::net
