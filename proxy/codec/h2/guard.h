// Per-connection accounting of the HTTP/2 abuse limits (proxy/exchange/h2_limits.h) for the server codec: the
// codec reports what the client does (every frame header, every stream reset, every byte of response
// progress) and closes the connection with GOAWAY (ENHANCE_YOUR_CALM) once the guard says a limit is
// exceeded. The limits nghttp2 enforces itself are set on its options here too.
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <string_view>
#include <vector>

#include "proxy/exchange/h2_limits.h"
#include "proxy/io/asio.h"

namespace sluice::proxy::h2 {

// `burst` tokens at first, refilled at `rate` per second up to `burst`; take() spends one.
class TokenBucket {
 public:
  TokenBucket(std::uint32_t burst, std::uint32_t rate, Clock::time_point now)
      : burst_(burst), rate_(rate), tokens_(burst), last_(now) {}
  bool take(Clock::time_point now);

 private:
  double burst_, rate_, tokens_;
  Clock::time_point last_;
};

// Client stream identifiers that were skipped over: they are closed (RFC 9113 §5.1.1), and a HEADERS on
// one of them later is a connection error PROTOCOL_ERROR, which nghttp2 does not check (it ignores the
// frame). The last `kRemembered` gaps are kept; older ones are ignored as nghttp2 would.
class SkippedStreamIds {
 public:
  static constexpr std::size_t kRemembered = 64;
  // A HEADERS frame on `id`; false when `id` was skipped.
  bool accept(std::int32_t id);

 private:
  std::int32_t highest_ = 0;
  // Inclusive ranges of odd identifiers, oldest first. A vector, not a deque: an empty std::deque still
  // allocates its first 512-byte block and its map, which every h2 connection would hold for the gaps
  // that almost none has (bench/README.md, "Memory per idle connection"); dropping the oldest of at most
  // kRemembered moves 63 pairs, on the rare connection that skips identifiers.
  std::vector<std::pair<std::int32_t, std::int32_t>> gaps_;
};

class ConnectionGuard {
 public:
  explicit ConnectionGuard(const AbuseLimits& limits, Clock::time_point now = Clock::now());

  // nghttp2's own limits (continuations, queued acknowledgements, SETTINGS entries, RST_STREAM rate).
  void configure(nghttp2_option* opt) const;

  // Every frame header the client sends (nghttp2's on_begin_frame); false: close the connection.
  bool frame(const nghttp2_frame_hd& hd, Clock::time_point now = Clock::now());
  // sluice reset a stream because of the client (malformed, refused, too large); false: close.
  bool stream_rejected(Clock::time_point now = Clock::now());

  // Response bytes moved (queued by the app, taken into frames, written to the socket).
  void progress(Clock::time_point now = Clock::now()) { last_progress_ = now; }
  // With response bytes `waiting` for the client: has there been no progress for the stall timeout?
  bool stalled(bool waiting, Clock::time_point now = Clock::now()) const;
  Clock::duration stall_timeout() const { return limits_.stall_timeout; }
  // How often stalled() is asked: four times per timeout, so a stall is noticed between 1 and 1.25
  // timeouts after it began.
  Clock::duration stall_check_period() const {
    return std::max<Clock::duration>(limits_.stall_timeout / 4, std::chrono::milliseconds(10));
  }

  // The limit that was exceeded, for the log line ("" while none was).
  std::string_view violation() const { return violation_; }
  // The GOAWAY error code for a fatal nghttp2 error `rv` from nghttp2_session_mem_recv: a limit
  // (ours or nghttp2's) is ENHANCE_YOUR_CALM, a skipped stream identifier and anything else
  // PROTOCOL_ERROR.
  std::uint32_t goaway_code(int rv);

 private:
  bool exceeded(std::string_view what, std::uint32_t code = NGHTTP2_ENHANCE_YOUR_CALM) {
    violation_ = what;
    code_ = code;
    return false;
  }

  const AbuseLimits& limits_;
  TokenBucket resets_;
  TokenBucket control_;
  SkippedStreamIds ids_;
  Clock::time_point last_progress_;
  std::string_view violation_;
  std::uint32_t code_ = NGHTTP2_ENHANCE_YOUR_CALM;
};

}  // namespace sluice::proxy::h2
