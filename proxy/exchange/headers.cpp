// Header policy on the request path; see headers.h.
#include "proxy/exchange/headers.h"

#include <array>
#include <cstring>
#include <ctime>
#include <random>

#include "common/ascii.h"

namespace sluice::proxy {

bool is_hop_by_hop(std::string_view name) {
  static constexpr std::array<std::string_view, 8> kHop = {
      "connection", "keep-alive",          "proxy-connection",  "transfer-encoding",
      "te",         "proxy-authenticate", "proxy-authorization", "upgrade"};
  for (auto h : kHop)
    if (iequals(name, h)) return true;
  return false;
}

bool listed_in_connection(std::string_view value, std::string_view name) {
  while (!value.empty()) {
    auto comma = value.find(',');
    auto token = trim(value.substr(0, comma));
    if (iequals(token, name)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

std::string forwarded_node(std::string_view address) {
  address = trim(address);
  if (address.find(':') == std::string_view::npos) return std::string(address);
  std::string out;
  out.reserve(address.size() + 4);
  out.push_back('"');
  if (address.front() != '[') out.push_back('[');
  out.append(address);
  if (address.front() != '[') out.push_back(']');
  out.push_back('"');
  return out;
}

std::string forwarded_from_x_forwarded(std::string_view xff, std::string_view xfh,
                                       std::string_view xfp) {
  if (xff.empty() && xfh.empty() && xfp.empty()) return {};
  std::string out;
  // First element: for (first XFF node), host, proto — in queue-proxy's order.
  std::string_view rest = xff;
  bool have_pair = false;
  if (!xff.empty()) {
    auto comma = rest.find(',');
    out += "for=";
    out += forwarded_node(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    have_pair = true;
  }
  if (!xfh.empty()) {
    if (have_pair) out.push_back(';');
    out += "host=";
    out += xfh;
    have_pair = true;
  }
  if (!xfp.empty()) {
    if (have_pair) out.push_back(';');
    out += "proto=";
    out += xfp;
  }
  while (!rest.empty()) {
    auto comma = rest.find(',');
    out += ", for=";
    out += forwarded_node(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

void append_forwarded_hop(std::string& forwarded, std::string_view peer, std::string_view proto) {
  if (!forwarded.empty()) forwarded += ", ";
  forwarded += "for=";
  forwarded += forwarded_node(peer);
  forwarded += ";proto=";
  forwarded += proto;
}

void append_x_forwarded_for(std::string& xff, std::string_view peer) {
  if (!trim(xff).empty()) xff += ", ";
  xff += peer;
}

std::string_view http_date_now() {
  thread_local std::time_t formatted_at = -1;
  thread_local char text[32];
  thread_local std::size_t length = 0;
  const std::time_t now = std::time(nullptr);
  if (now != formatted_at) {
    std::tm utc{};
    gmtime_r(&now, &utc);
    length = std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);  // the C locale's names
    formatted_at = now;
  }
  return {text, length};
}

RequestIdGenerator::RequestIdGenerator() {
  std::random_device rd;
  state_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// splitmix64: fast, well distributed, and enough for ids that only need to be unique, not secret.
std::uint64_t RequestIdGenerator::next64() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string RequestIdGenerator::next() {
  std::string out;
  next_into(out);
  return out;
}

namespace {

// Each byte's two hex digits, so that an id is written a byte at a time.
constexpr auto kByteHex = [] {
  constexpr char kHex[] = "0123456789abcdef";
  std::array<std::array<char, 2>, 256> t{};
  for (std::size_t b = 0; b < 256; ++b) t[b] = {kHex[b >> 4], kHex[b & 0xf]};
  return t;
}();

}  // namespace

void RequestIdGenerator::next_into(std::string& out) {
  std::uint64_t hi = next64(), lo = next64();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  char digits[32];
  for (int i = 0; i < 8; ++i) {
    std::memcpy(digits + 2 * i, kByteHex[(hi >> (56 - 8 * i)) & 0xff].data(), 2);
    std::memcpy(digits + 16 + 2 * i, kByteHex[(lo >> (56 - 8 * i)) & 0xff].data(), 2);
  }
  // 8-4-4-4-12 hex digits.
  char text[36];
  std::memcpy(text, digits, 8);
  std::memcpy(text + 9, digits + 8, 4);
  std::memcpy(text + 14, digits + 12, 4);
  std::memcpy(text + 19, digits + 16, 4);
  std::memcpy(text + 24, digits + 20, 12);
  text[8] = text[13] = text[18] = text[23] = '-';
  out.assign(text, sizeof text);
}

bool is_activator_revision_header(std::string_view name) {
  return iequals(name, "knative-serving-revision") || iequals(name, "knative-serving-namespace");
}

}  // namespace sluice::proxy
