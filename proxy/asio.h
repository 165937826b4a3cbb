// The network short names (common/net.h), in the proxy's namespace.
#pragma once

#include "common/net.h"

namespace sluice::proxy {

namespace asio = net::asio;
namespace beast = net::beast;
namespace http = net::http;
using net::Clock;
using net::error_code;
using net::tcp;
using net::use_nothrow;

}  // namespace sluice::proxy
