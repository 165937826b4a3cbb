// Trace context parsing and sampling; see trace_context.h.
#include "proxy/telemetry/trace_context.h"

#include <algorithm>
#include <random>

#include "proxy/io/field_value.h"

namespace sluice::proxy::telemetry {
namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool has_upper_hex(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'F'; });
}

// Exactly 2*N hex digits (B3 allows a 64-bit trace id: then the high half is zero).
template <std::size_t N>
bool parse_hex(std::string_view s, std::array<std::uint8_t, N>& out) {
  out.fill(0);
  if (s.size() > 2 * N || s.size() % 2 != 0 || s.empty()) return false;
  const std::size_t offset = N - s.size() / 2;
  for (std::size_t i = 0; i < s.size() / 2; ++i) {
    int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[offset + i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  for (auto b : out)
    if (b != 0) return true;
  return false;  // all zeroes is invalid
}

std::mt19937_64& generator() {
  thread_local std::mt19937_64 g{[] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }()};
  return g;
}

template <std::size_t N>
std::array<std::uint8_t, N> random_id() {
  std::array<std::uint8_t, N> id{};
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      auto r = generator()();
      for (std::size_t j = 0; j < 8 && i + j < N; ++j) id[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
    }
  } while (id == std::array<std::uint8_t, N>{});
  return id;
}

}  // namespace

std::optional<TraceContext> parse_traceparent(std::string_view v) {
  // version "-" trace-id "-" parent-id "-" flags; version ff is invalid, 00 must be exactly 55 chars.
  if (v.size() < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  if (has_upper_hex(v.substr(0, 55))) return std::nullopt;  // Go's extractPart refuses A-F
  if (v.substr(0, 2) == "ff" || nibble(v[0]) < 0 || nibble(v[1]) < 0) return std::nullopt;
  if (v.substr(0, 2) == "00" && v.size() != 55) return std::nullopt;
  if (v.size() > 55 && v[55] != '-') return std::nullopt;
  TraceContext c;
  if (!parse_hex(v.substr(3, 32), c.trace_id) || !parse_hex(v.substr(36, 16), c.parent_span_id)) return std::nullopt;
  int hi = nibble(v[53]), lo = nibble(v[54]);
  if (hi < 0 || lo < 0) return std::nullopt;
  const auto flags = static_cast<std::uint8_t>(hi << 4 | lo);
  if (v.substr(0, 2) == "00" && flags > 3) return std::nullopt;
  c.flags = flags & 3;
  c.sampled = (flags & 1) != 0;
  return c;
}

std::optional<TraceContext> parse_b3(std::string_view v) {
  // {TraceId}-{SpanId}[-{SamplingState}[-{ParentSpanId}]]
  auto a = v.find('-');
  if (a == std::string_view::npos) return std::nullopt;
  auto b = v.find('-', a + 1);
  TraceContext c;
  if (!parse_hex(v.substr(0, a), c.trace_id)) return std::nullopt;
  if (!parse_hex(v.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1), c.parent_span_id))
    return std::nullopt;
  auto state = b == std::string_view::npos ? std::string_view{} : v.substr(b + 1, 1);
  c.sampled = state == "1" || state == "d";
  c.flags = c.sampled ? 1 : 0;
  return c;
}

std::optional<TraceContext> extract_parent(const http::request_header<>& req, bool b3) {
  if (auto tp = field_value(req, "traceparent"); !tp.empty()) {
    if (auto c = parse_traceparent(tp)) {
      c->trace_state = std::string(field_value(req, "tracestate"));
      return c;
    }
  }
  if (!b3) return std::nullopt;
  if (auto single = field_value(req, "b3"); !single.empty()) return parse_b3(single);
  auto trace = field_value(req, "x-b3-traceid"), span = field_value(req, "x-b3-spanid");
  if (trace.empty() || span.empty()) return std::nullopt;
  TraceContext c;
  if (!parse_hex(trace, c.trace_id) || !parse_hex(span, c.parent_span_id)) return std::nullopt;
  auto sampled = field_value(req, "x-b3-sampled");
  c.sampled = sampled == "1" || sampled == "true" || field_value(req, "x-b3-flags") == "1";
  c.flags = c.sampled ? 1 : 0;
  return c;
}

TraceId new_trace_id() { return random_id<16>(); }
SpanId new_span_id() { return random_id<8>(); }

bool ratio_samples(const TraceId& id, double rate) {
  std::uint64_t x = 0;
  for (std::size_t i = 8; i < 16; ++i) x = x << 8 | id[i];
  const auto bound = static_cast<std::uint64_t>(rate * 9223372036854775808.0);  // rate * 2^63
  return (x >> 1) < bound;
}

bool should_sample(double rate, const std::optional<TraceContext>& parent, const TraceId& trace_id) {
  if (rate >= 1) return true;
  if (rate <= 0) return false;
  if (parent) return parent->sampled;
  return ratio_samples(trace_id, rate);
}

std::string format_traceparent(const TraceId& trace, const SpanId& span, std::uint8_t flags) {
  const std::array<std::uint8_t, 1> f{flags};
  return "00-" + hex(trace) + "-" + hex(span) + "-" + hex(f);
}

}  // namespace sluice::proxy::telemetry
