// RFC 9113 §8 checks on a request that nghttp2 does not make itself (nghttp2 already refuses upper-case
// and invalid field names, connection-specific fields, TE other than "trailers", bad pseudo-header
// fields and Content-Length mismatches with RST_STREAM PROTOCOL_ERROR).
#pragma once

#include <optional>
#include <string_view>

#include "proxy/exchange/exchange.h"

namespace sluice::proxy::h2 {

// The local answer a decoded request gets instead of being forwarded, or nullopt when it may go on:
// 431 when its header list passed the limit (`too_large`), 400 when it has several Host fields or a
// Host that names another authority than :authority (§8.3.1).
std::optional<LocalAnswer> request_refusal(const http::request_header<>& req, std::string_view authority,
                                           bool too_large);

}  // namespace sluice::proxy::h2
