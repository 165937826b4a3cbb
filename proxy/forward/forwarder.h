// The forwarder: the policy every exchange goes through, once for every protocol pair. A downstream codec
// hands it a ServerExchange (through the worker's ExchangeHandler, context.h); it answers health checks,
// counts the exchange in the stats, passes the breaker and the gateway's instance choice, picks the app's
// protocol, opens a ClientExchange through the worker's Connector (upstream/connector.h), sends the request
// with this hop's header policy, retries a stale connection, relays 1xx, head, body and trailers both ways
// with back-pressure, enforces the exchange's deadlines, maps every failure to one status (failure.h), ends
// the exchange at once when the client goes away (499), and writes the request log and metrics. It never
// sees bytes of a protocol; the codecs see no policy.
#pragma once

#include "proxy/exchange/exchange.h"
#include "proxy/upstream/connector.h"

namespace sluice::proxy {

struct ForwardContext;

// Runs one exchange to its end: the response sent (or cut), the request log written, stats counted.
asio::awaitable<void> forward(ForwardContext& worker, ServerExchange& down);

// Writes the request-log line of an exchange that ended before the forwarder saw it (a request the
// codec could not parse), when the request log is on. `req`: its head, when there is one.
void log_exchange(const ForwardContext& worker, const ExchangeRecord& record,
                  const http::request_header<>* req = nullptr);

}  // namespace sluice::proxy
