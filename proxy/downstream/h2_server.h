// The HTTP/2 server codec: one downstream connection (h2c or h2 over TLS). nghttp2 does the framing,
// HPACK and flow control; each stream is a ServerExchange handed to the forwarder. Flow control is tied
// to the app: a request's DATA is acknowledged (WINDOW_UPDATE) only once the forwarder passed it on, and
// response bytes are taken from the app only while the client's window lets them leave.
#pragma once

#include "proxy/downstream/context.h"
#include "proxy/downstream/h2_handover.h"
#include "proxy/exchange/peer.h"

namespace sluice::proxy::h2 {

// Starts serving the connection in a coroutine of its own, which runs to the connection's end and then
// tells the worker (ServerContext::served); `peer` names the client. The caller's frames (sniffing, the TLS
// handshake, an h2c upgrade's HTTP/1.1 exchange) end while the session runs.
void start(ServerContext& worker, Handover handover, PeerName peer);

}  // namespace sluice::proxy::h2
