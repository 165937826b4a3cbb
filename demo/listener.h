// The demo app's listening socket and its accept loop.
#pragma once

#include <string>

#include "demo/exchange.h"

namespace sluice::demo {

// Binds and listens on host:port (port 0 = ephemeral). Throws boost::system::system_error on
// failure.
tcp::acceptor open_listener(asio::io_context& ioc, const std::string& host, std::uint16_t port);

// Accepts until the acceptor is closed; each connection runs as its own coroutine.
asio::awaitable<void> accept_loop(tcp::acceptor& acceptor);

}  // namespace sluice::demo
