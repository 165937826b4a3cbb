// The forwarder: the policy every exchange goes through, once for every protocol pair. A downstream codec
// hands it a ServerExchange; it answers health checks, counts the exchange in the stats, passes the
// breaker and the gateway's instance choice, picks the app's protocol, opens a ClientExchange through the
// worker's Connector, sends the request with this hop's header policy, retries a stale connection, relays
// 1xx, head, body and trailers both ways with back-pressure, enforces the exchange's deadlines, maps
// every failure to one status (failure.h), ends the exchange at once when the client goes away (499),
// and writes the request log and metrics. It never sees bytes of a protocol; the codecs see no policy.
#pragma once

#include <memory>
#include <tuple>

#include "proxy/exchange.h"

namespace sluice::proxy {

struct WorkerContext;

enum class AppProtocol { http1, h2c };

// Opens exchanges to the app: the worker's HTTP/1.1 pools and h2c clients (tests put fakes here).
class Connector {
 public:
  // `instance` is the gateway's instance for this exchange, or null for the configured upstream.
  // `verify`: a pooled connection must be checked first, since the request could not go again.
  virtual asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientExchange>>> open(
      AppProtocol protocol, const tcp::endpoint* instance, bool verify) = 0;
  // An exchange on a connection that is ready now (a pooled one), without suspending; null when `open`
  // has to wait. The forwarder asks this first: most exchanges under load find a pooled connection, and
  // a coroutine call costs a frame.
  virtual std::unique_ptr<ClientExchange> reuse(AppProtocol, const tcp::endpoint*, bool /*verify*/) {
    return nullptr;
  }

 protected:
  ~Connector() = default;
};

// Runs one exchange to its end: the response sent (or cut), the request log written, stats counted.
asio::awaitable<void> forward(WorkerContext& worker, ServerExchange& down);

// Writes the request-log line of an exchange that ended before the forwarder saw it (a request the
// codec could not parse), when the request log is on. `req`: its head, when there is one.
void log_exchange(const WorkerContext& worker, const ExchangeRecord& record,
                  const http::request_header<>* req = nullptr);

}  // namespace sluice::proxy
