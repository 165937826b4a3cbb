// The HTTP/2 server codec: one downstream connection (h2c or h2 over TLS). nghttp2 does the framing,
// HPACK and flow control; each stream is a ServerExchange handed to the forwarder. Flow control is tied
// to the app: a request's DATA is acknowledged (WINDOW_UPDATE) only once the forwarder passed it on, and
// response bytes are taken from the app only while the client's window lets them leave.
#pragma once

#include "proxy/h2/handover.h"
#include "proxy/listen/peer.h"
#include "proxy/worker_context.h"

namespace sluice::proxy::h2 {

// Runs the connection to its end, taking the socket out of `handover`; `peer` names the client. (References,
// not values: GCC 12 destroys by-value temporaries of a co_await expression twice.)
asio::awaitable<void> serve(WorkerContext& worker, Handover& handover, const PeerName& peer);

}  // namespace sluice::proxy::h2
