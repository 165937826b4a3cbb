// How the forwarder reaches the app: a Connector opens exchanges to it. In a worker that is its Upstreams
// (upstreams.h); tests put fakes here.
#pragma once

#include <memory>
#include <tuple>

#include "proxy/exchange/exchange.h"

namespace sluice::proxy {

enum class AppProtocol { http1, h2c };

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

}  // namespace sluice::proxy
