// One accepted connection of the demo app: reads requests in order, answers each before the next.
#pragma once

#include "demo/exchange.h"

namespace sluice::demo {

asio::awaitable<void> serve_connection(tcp::socket socket);

}  // namespace sluice::demo
