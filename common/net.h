// Short names for the Asio/Beast types sluice's network code uses everywhere (the proxy, the control
// listeners, the scaler's Stat scrape).
#pragma once

#include <chrono>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace sluice::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// Errors on the data path are values: every awaited operation yields (error_code, ...) instead of throwing.
inline constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

}  // namespace sluice::net
