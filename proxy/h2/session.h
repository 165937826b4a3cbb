// One downstream HTTP/2 connection (h2c): nghttp2 does the framing, HPACK and flow control; each
// stream is an exchange forwarded to the app over the HTTP/1.1 pool, with the same admission
// (health checks, stats, breaker) and header policy as HTTP/1.1. Flow control is tied to the app:
// a request's DATA is acknowledged (WINDOW_UPDATE) only once written to the app, and a response is
// read from the app only as fast as the client's window lets it leave.
#pragma once

#include "proxy/h2/handover.h"
#include "proxy/worker_context.h"

namespace sluice::proxy::h2 {

// Runs the connection to its end, taking the socket out of `handover`. `peer_address` is the client
// IP, `peer` its ip:port. (References, not values: GCC 12 destroys by-value temporaries of a
// co_await expression twice.)
asio::awaitable<void> serve(WorkerContext& worker, Handover& handover, const std::string& peer_address,
                            const std::string& peer);

}  // namespace sluice::proxy::h2
