// The demo app's endpoints. Each returns whether the connection may carry another request
// (false after an I/O error or a deliberate close).
#pragma once

#include "demo/exchange.h"

namespace sluice::demo {

// Chooses the route from the request target and runs it.
asio::awaitable<bool> dispatch(Exchange& ex);

// Sends a complete response with a fixed body (no body for HEAD, 1xx, 204, 304).
asio::awaitable<bool> respond(Exchange& ex, unsigned status, std::string_view content_type,
                              std::string_view body);

// body_routes.cpp: routes that stream the request body.
asio::awaitable<bool> route_echo(Exchange& ex);
asio::awaitable<bool> route_sink(Exchange& ex);

// stream_routes.cpp: routes that stream a generated response body.
asio::awaitable<bool> route_bytes(Exchange& ex, std::uint64_t bytes, bool chunked);
asio::awaitable<bool> route_slow_body(Exchange& ex, std::uint64_t chunks, std::uint64_t gap_ms);
asio::awaitable<bool> route_close_mid(Exchange& ex);

// websocket_echo.cpp: takes over the socket; the connection ends with the WebSocket session.
asio::awaitable<bool> route_websocket(Exchange& ex);

}  // namespace sluice::demo
