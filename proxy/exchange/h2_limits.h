// HTTP/2 abuse limits: how much a client connection may do that makes no request progress before it is
// closed with GOAWAY (ENHANCE_YOUR_CALM). Plain options, filled in app/ and read by the guard
// (proxy/codec/h2/guard.h), which counts them per connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace sluice::proxy::h2 {

struct AbuseLimits {
  // SETTINGS_MAX_CONCURRENT_STREAMS; a stream beyond it is refused (RST_STREAM REFUSED_STREAM), and
  // counts as a reset below.
  std::uint32_t max_concurrent_streams = 100;
  // Streams reset before their response completed: by the client's RST_STREAM (rapid reset,
  // CVE-2023-44487) or by sluice because the client's frames were malformed, refused or too large.
  // A token bucket: `reset_burst` at once, refilled at `reset_rate` per second.
  std::uint32_t reset_burst = 1000;
  std::uint32_t reset_rate = 33;
  // Frames that carry no request progress (SETTINGS, PING, PRIORITY, unknown types, and DATA, HEADERS
  // or CONTINUATION without payload and without END_STREAM): a token bucket as well.
  std::uint32_t control_burst = 1000;
  std::uint32_t control_rate = 100;
  // CONTINUATION frames after one HEADERS (CVE-2024-27316); nghttp2 enforces it.
  std::size_t max_continuations = 8;
  // SETTINGS and PING acknowledgements queued for a client that does not read them; nghttp2 enforces it.
  std::size_t max_outbound_ack = 1000;
  // Entries in one SETTINGS frame; nghttp2 enforces it.
  std::size_t max_settings = 32;
  // Response bytes waiting for a client that neither opens its flow-control window nor reads its
  // socket: after this long without progress the connection is closed. 0 = never.
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(30)};
};

}  // namespace sluice::proxy::h2
