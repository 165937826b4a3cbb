// Listening sockets; see listen.h.
#include "common/listen.h"

#include <sys/socket.h>

#include <system_error>

namespace sluice::net {
namespace {

using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

[[noreturn]] void fail(const boost::system::system_error& e, const tcp::endpoint& ep, const std::string& listener) {
  if (e.code() == asio::error::address_in_use) throw AddressInUse(ep, listener);
  throw std::system_error(e.code(), listener + " listener on " + endpoint_text(ep));
}

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
  if (ep.port() == 0) return;
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

}  // namespace sluice::net
