// Listening sockets handed over by a predecessor (common/listen.h): per-node mode's agent restart starts a
// pod's new proxy with its old one's sockets, and every port must take the one bound to its address. And
// a listener closed for good turns new clients away before it closes, so that none is accepted and reset.
#include "common/listen.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace sluice::net {
namespace {

// A listening socket on 127.0.0.1 (a port the kernel picks), as the predecessor made it.
int predecessor_listener(asio::io_context& io, tcp::endpoint& bound) {
  tcp::acceptor a(io);
  bound = tcp::endpoint(asio::ip::make_address("127.0.0.1"), open_listener(a, {asio::ip::make_address("127.0.0.1"), 0}, "old", true));
  return a.release();
}

TEST(InheritedListeners, APortTakesTheSocketBoundToItsAddressWithTheConnectionsQueuedThere) {
  asio::io_context io;
  tcp::endpoint ep;
  const int old = predecessor_listener(io, ep);
  // A client connects while the predecessor is handing over: nobody accepted it yet.
  tcp::socket client(io);
  client.connect(ep);
  inherit_listeners({::dup(old)});  // as the successor receives it
  // The port is held (by the predecessor's copy too), yet neither the claim nor the bind refuses it.
  EXPECT_NO_THROW(claim_port(ep, "proxy"));
  tcp::acceptor taken(io);
  EXPECT_EQ(open_listener(taken, ep, "proxy", true), ep.port());
  const auto held = listening_descriptors();
  EXPECT_NE(std::find(held.begin(), held.end(), taken.native_handle()), held.end());
  ::close(old);  // the predecessor stops accepting: the socket lives on in the successor
  tcp::socket served(io);
  taken.accept(served);
  EXPECT_EQ(served.remote_endpoint(), client.local_endpoint());
  EXPECT_EQ(close_unclaimed_listeners(), 0u);
}

TEST(InheritedListeners, AnAddressNobodyHandedOverIsStillClaimedAndOnesNoPortTookAreClosed) {
  asio::io_context io;
  tcp::endpoint ep;
  const int old = predecessor_listener(io, ep);
  inherit_listeners({old});
  // A port something else listens on is refused as before.
  tcp::acceptor squatter(io);
  const tcp::endpoint squatted(asio::ip::make_address("127.0.0.1"), open_listener(squatter, {asio::ip::make_address("127.0.0.1"), 0}, "other", false));
  EXPECT_THROW(claim_port(squatted, "proxy"), AddressInUse);
  // The one no port took is closed once every port is open.
  EXPECT_EQ(close_unclaimed_listeners(), 1u);
  EXPECT_EQ(::fcntl(old, F_GETFD), -1);
}

// A connect() started without waiting for it, as a client's first SYN.
int start_connect(const tcp::endpoint& ep) {
  const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int rc = ::connect(fd, ep.data(), static_cast<socklen_t>(ep.size()));
  EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  return fd;
}

// The connect's outcome once it has one within `limit`: 0 connected, an errno, or -1 for still pending.
int connect_outcome(int fd, std::chrono::milliseconds limit) {
  pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) == 0) return -1;
  int error = 0;
  socklen_t size = sizeof error;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
  return error;
}

TEST(ClosingListener, ANewClientIsTurnedAwayAndRefusedWhileOneAlreadyQueuedIsServed) {
  for (const char* address : {"127.0.0.1", "::1"}) {
    SCOPED_TRACE(address);
    asio::io_context io;
    tcp::acceptor listener(io);
    error_code probe;
    listener.open(asio::ip::make_address(address).is_v6() ? tcp::v6() : tcp::v4(), probe);
    if (!probe) listener.bind({asio::ip::make_address(address), 0}, probe);
    listener.close();
    if (probe) continue;  // a machine without ::1: the IPv4 round stands
    const tcp::endpoint ep(asio::ip::make_address(address), open_listener(listener, {asio::ip::make_address(address), 0}, "proxy", true));
    tcp::socket queued(io);
    queued.connect(ep);

    ASSERT_TRUE(refuse_new_handshakes(listener));
    const int late = start_connect(ep);
    // Its SYN was dropped: no handshake within the time a loopback one takes many times over (the
    // client retries after a second).
    EXPECT_EQ(connect_outcome(late, std::chrono::milliseconds(300)), -1);

    // The one queued before is accepted and served both ways, through the filter its socket inherited.
    tcp::socket served(io);
    listener.accept(served);
    EXPECT_EQ(served.remote_endpoint(), queued.local_endpoint());
    asio::write(queued, asio::buffer("ping", 4));
    std::array<char, 4> got{};
    asio::read(served, asio::buffer(got));
    EXPECT_EQ(std::string(got.data(), 4), "ping");
    asio::write(served, asio::buffer("pong", 4));
    asio::read(queued, asio::buffer(got));
    EXPECT_EQ(std::string(got.data(), 4), "pong");

    // Closed, the port refuses the turned-away client's retry: it never had a connection to lose.
    listener.close();
    EXPECT_EQ(connect_outcome(late, std::chrono::seconds(5)), ECONNREFUSED);
    ::close(late);
  }
}

TEST(ClosingListener, AnInheritedListenerAcceptsNewClientsEvenIfItsPredecessorTurnedThemAway) {
  asio::io_context io;
  tcp::acceptor old(io);
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), open_listener(old, {asio::ip::make_address("127.0.0.1"), 0}, "old", true));
  ASSERT_TRUE(refuse_new_handshakes(old));
  inherit_listeners({::dup(old.native_handle())});
  tcp::acceptor taken(io);
  ASSERT_EQ(open_listener(taken, ep, "proxy", true), ep.port());
  old.close();
  const int client = start_connect(ep);
  EXPECT_EQ(connect_outcome(client, std::chrono::seconds(5)), 0);
  ::close(client);
}

}  // namespace
}  // namespace sluice::net
