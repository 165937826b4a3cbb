// WebSocket upgrade through sluice: a real Beast client talks to the demo app's echo endpoint.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "harness.h"

namespace sluice::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

TEST(WebSocket, EchoesTextAndBinaryMessagesThroughTheTunnel) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port,
                                 // The tunnel outlives both timeouts: upgraded connections are not cut by them.
                                 .env = {{"REVISION_RESPONSE_START_TIMEOUT_SECONDS", "1"}}});
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

  // Idle for longer than the response-start timeout: the tunnel must survive it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ws.text(true);
  ws.write(asio::buffer(std::string("still here")));
  ws.read(buf);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "still here");
  ws.close(websocket::close_code::normal);
}

}  // namespace
}  // namespace sluice::test
