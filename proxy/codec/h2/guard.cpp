// HTTP/2 abuse accounting; see guard.h.
#include "proxy/codec/h2/guard.h"

#include <algorithm>

namespace sluice::proxy::h2 {

bool TokenBucket::take(Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + std::max(0.0, elapsed) * rate_);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

bool SkippedStreamIds::accept(std::int32_t id) {
  if (id % 2 == 0) return true;  // not a client stream: nghttp2 refuses it
  if (id > highest_) {
    const std::int32_t next = highest_ == 0 ? 1 : highest_ + 2;
    if (id > next) {
      gaps_.emplace_back(next, id - 2);
      if (gaps_.size() > kRemembered) gaps_.erase(gaps_.begin());
    }
    highest_ = id;
    return true;
  }
  for (const auto& [low, high] : gaps_)
    if (id >= low && id <= high) return false;
  return true;
}

ConnectionGuard::ConnectionGuard(const AbuseLimits& limits, Clock::time_point now)
    : limits_(limits),
      resets_(limits.reset_burst, limits.reset_rate, now),
      control_(limits.control_burst, limits.control_rate, now),
      last_progress_(now) {}

void ConnectionGuard::configure(nghttp2_option* opt) const {
  nghttp2_option_set_max_continuations(opt, limits_.max_continuations);
  nghttp2_option_set_max_outbound_ack(opt, limits_.max_outbound_ack);
  nghttp2_option_set_max_settings(opt, limits_.max_settings);
  // Ours (frame()) counts the same frames first; nghttp2's stays as a second line, twice as loose: it
  // refills once a second (ours continuously), so with equal settings it could run out first and close
  // with INTERNAL_ERROR instead of ENHANCE_YOUR_CALM.
  nghttp2_option_set_stream_reset_rate_limit(opt, 2 * static_cast<std::uint64_t>(limits_.reset_burst),
                                             2 * static_cast<std::uint64_t>(limits_.reset_rate));
}

bool ConnectionGuard::frame(const nghttp2_frame_hd& hd, Clock::time_point now) {
  const bool end_stream = (hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  bool control = false;
  switch (hd.type) {
    case NGHTTP2_RST_STREAM:
      if (!resets_.take(now)) return exceeded("stream resets (rapid reset)");
      return true;
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
    case NGHTTP2_PRIORITY: control = true; break;
    case NGHTTP2_HEADERS:
      if (!ids_.accept(hd.stream_id)) return exceeded("HEADERS on a skipped stream identifier", NGHTTP2_PROTOCOL_ERROR);
      control = hd.length == 0 && !end_stream;
      break;
    case NGHTTP2_DATA:
    case NGHTTP2_CONTINUATION: control = hd.length == 0 && !end_stream; break;
    case NGHTTP2_WINDOW_UPDATE:
    case NGHTTP2_GOAWAY:
    case NGHTTP2_PUSH_PROMISE: break;
    default: control = true; break;  // extension frames are ignored, but cost a parse each
  }
  if (control && !control_.take(now)) return exceeded("control or empty frames");
  return true;
}

bool ConnectionGuard::stream_rejected(Clock::time_point now) {
  if (!resets_.take(now)) return exceeded("streams rejected");
  return true;
}

bool ConnectionGuard::stalled(bool waiting, Clock::time_point now) const {
  if (!waiting || limits_.stall_timeout.count() <= 0) return false;
  return now - last_progress_ >= limits_.stall_timeout;
}

std::uint32_t ConnectionGuard::goaway_code(int rv) {
  if (rv == NGHTTP2_ERR_FLOODED) {
    if (violation_.empty()) violation_ = "queued acknowledgements (SETTINGS/PING flood)";
    return NGHTTP2_ENHANCE_YOUR_CALM;
  }
  if (rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
    if (violation_.empty()) violation_ = "CONTINUATION frames";
    return NGHTTP2_ENHANCE_YOUR_CALM;
  }
  if (rv == NGHTTP2_ERR_TOO_MANY_SETTINGS) {
    if (violation_.empty()) violation_ = "SETTINGS entries";
    return NGHTTP2_ENHANCE_YOUR_CALM;
  }
  return violation_.empty() ? static_cast<std::uint32_t>(NGHTTP2_PROTOCOL_ERROR) : code_;
}

}  // namespace sluice::proxy::h2
