// Stat encodings; see autoscaler_stat.h.
#include "metrics/autoscaler_stat.h"

#include <bit>
#include <cstdint>

namespace sluice::metrics {

double StatSample::requests_per_second() const {
  return report_period_seconds > 0 ? static_cast<double>(period.requests) / report_period_seconds : 0;
}

double StatSample::proxied_requests_per_second() const {
  return report_period_seconds > 0 ? static_cast<double>(period.proxied_requests) / report_period_seconds : 0;
}

// The Stat message of stat.proto written by hand: seven scalar fields do not justify a protobuf
// runtime's resident memory in every pod. Byte for byte what protoc's code writes (proto3 leaves out
// fields at their default); a unit test holds the two to that.
namespace {

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_double(std::string& out, int field, double v) {
  auto bits = std::bit_cast<std::uint64_t>(v);
  if (bits == 0) return;  // +0.0 is proto3's default
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | 1);  // wire type 1: 64-bit
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void put_string(std::string& out, int field, std::string_view v) {
  if (v.empty()) return;
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | 2);  // wire type 2: length-delimited
  put_varint(out, v.size());
  out.append(v);
}

}  // namespace

std::string encode_stat_protobuf(const PodIdentity& pod, const StatSample& s) {
  std::string out;
  out.reserve(64 + pod.pod.size());
  put_string(out, 1, pod.pod);                                   // pod_name
  put_double(out, 2, s.period.average_concurrency);              // average_concurrent_requests
  put_double(out, 3, s.period.average_proxied_concurrency);      // average_proxied_concurrent_requests
  put_double(out, 4, s.requests_per_second());                   // request_count
  put_double(out, 5, s.proxied_requests_per_second());           // proxied_request_count
  put_double(out, 6, s.uptime_seconds);                          // process_uptime
  return out;                                                    // timestamp (7): never set, as QP
}

}  // namespace sluice::metrics
