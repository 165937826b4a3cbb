// /ws: a WebSocket echo server on the upgraded connection; text stays text, binary stays binary.
#include <boost/beast/websocket.hpp>

#include "demo/routes.h"

namespace sluice::demo {

asio::awaitable<bool> route_websocket(Exchange& ex) {
  namespace websocket = beast::websocket;
  websocket::stream<tcp::socket> ws(std::move(ex.socket));
  ws.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "sluice-demo-app"); }));
  if (auto [ec] = co_await ws.async_accept(ex.parser.get(), use_nothrow); ec) co_return false;

  beast::flat_buffer message;
  for (;;) {
    auto [rec, rn] = co_await ws.async_read(message, use_nothrow);
    (void)rn;
    if (rec) break;  // closed by the peer (websocket::error::closed) or the connection failed
    ws.text(ws.got_text());
    auto [wec, wn] = co_await ws.async_write(message.data(), use_nothrow);
    (void)wn;
    if (wec) break;
    message.consume(message.size());
  }
  co_return false;  // the socket now belongs to `ws` and closes with it
}

}  // namespace sluice::demo
