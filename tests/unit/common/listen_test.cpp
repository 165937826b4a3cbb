// Listening sockets handed over by a predecessor (common/listen.h): per-node mode's agent restart starts a
// pod's new proxy with its old one's sockets, and every port must take the one bound to its address.
#include "common/listen.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

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

}  // namespace
}  // namespace sluice::net
