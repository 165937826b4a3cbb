// WebSocket upgrade through sluice: a real Beast client talks to the demo app's echo endpoint.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "harness.h"

#include <csignal>

namespace sluice::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

TEST(WebSocket, EchoesTextAndBinaryMessagesThroughTheTunnel) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port,
                                 // The tunnel outlives both timeouts: upgraded connections are not cut by them.
                                 // (queue-proxy's open bug knative/serving#16169 is the first).
                                 .env = {{"REVISION_RESPONSE_START_TIMEOUT_SECONDS", "1"},
                                         {"REVISION_TIMEOUT_SECONDS", "1"}}});
  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(10));
  beast::get_lowest_layer(ws).connect(
      asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(sidecar.port)));
  ws.handshake("app.example", "/ws");

  ws.text(true);
  ws.write(asio::buffer(std::string("hello through sluice")));
  beast::flat_buffer buf;
  ws.read(buf);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "hello through sluice");
  buf.clear();

  std::string blob(200000, '\0');
  for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 7);
  ws.binary(true);
  ws.write(asio::buffer(blob));
  ws.read(buf);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), blob);
  buf.clear();

  // Idle for longer than the response-start and request timeouts: the tunnel must survive them.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ws.text(true);
  ws.write(asio::buffer(std::string("still here")));
  ws.read(buf);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "still here");
  ws.close(websocket::close_code::normal);
}

struct Client {
  explicit Client(int port) : ws(io) {
    beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(20));
    beast::get_lowest_layer(ws).connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    ws.handshake("app.example", "/ws");
  }
  std::string echo(const std::string& text) {
    ws.text(true);
    ws.write(asio::buffer(text));
    beast::flat_buffer buf;
    ws.read(buf);
    return beast::buffers_to_string(buf.data());
  }
  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws;
};

TEST(WebSocket, DrainWaitsForAnUpgradedConnectionThenExitsZero) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "200"}}});
  Client c(sidecar.port);
  ASSERT_EQ(c.echo("before"), "before");
  sidecar.process->signal(SIGTERM);
  ASSERT_TRUE(sidecar.process->wait_for_line("drained: closing listeners"));
  // Listeners are closed; the upgraded connection still works, and the process waits for it.
  EXPECT_EQ(c.echo("during drain"), "during drain");
  EXPECT_EQ(exit_status(*sidecar.process, std::chrono::milliseconds(300)), "still running");
  c.ws.close(websocket::close_code::normal);
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
}

TEST(WebSocket, DrainCutsAnUpgradedConnectionAtItsLimit) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{
      .user_port = backend.port,
      .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "200"}, {"SLUICE_DRAIN_TIMEOUT_SECONDS", "1"}}});
  Client c(sidecar.port);
  ASSERT_EQ(c.echo("before"), "before");
  auto signalled = std::chrono::steady_clock::now();
  sidecar.process->signal(SIGTERM);
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
  // Quiet period (0.2 s) plus the 1 s limit, not the open-ended life of the connection.
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(5));
  beast::flat_buffer buf;
  beast::error_code ec;
  c.ws.read(buf, ec);
  EXPECT_TRUE(ec) << "the tunnel should have been cut";
}

}  // namespace
}  // namespace sluice::test
