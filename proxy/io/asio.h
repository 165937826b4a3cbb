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

// Whether an I/O error says the peer closed or reset its end of the connection (not a timeout, not a
// protocol error): end of file, a reset, a broken pipe, or Beast's end_of_stream.
inline bool peer_closed(error_code ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::end_of_stream;
}

}  // namespace sluice::proxy
