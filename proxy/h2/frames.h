// What the server and the client sides share of nghttp2: field names as HTTP/2 wants them, and the
// data callback that feeds a body (then its trailers) from a buffer.
#pragma once

#include <nghttp2/nghttp2.h>

#include <string>
#include <string_view>

#include "proxy/asio.h"
#include "proxy/h2/fields.h"

namespace sluice::proxy::h2 {

// HTTP/2 field names are lower case (RFC 9113 §8.2.1).
std::string lowercase(std::string_view s);

// For nghttp2's data source callback: up to `length` bytes of `pending` into `buf`. Once `pending` is
// empty and the body `done`, the end of the stream, with `trailers` in a HEADERS frame of their own when
// there are any; while it is empty and not done, NGHTTP2_ERR_DEFERRED with `deferred` set (the owner
// calls nghttp2_session_resume_data when more comes).
ssize_t take_body(nghttp2_session* ng, std::int32_t id, std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                  beast::flat_buffer& pending, bool done, const FieldList& trailers, bool& deferred);

}  // namespace sluice::proxy::h2
