// grpc.health.v1 readiness probes; see grpc_health_probe.h.
#include "proxy/control/grpc_health_probe.h"

#include <array>

#include "proxy/codec/h2/grpc_client_session.h"

namespace sluice::proxy {
namespace {

// What queue-proxy sends: grpc.WithUserAgent("kube-probe/" + KubeMajor + "/" + KubeMinor) with both
// left empty by its readiness prober, to which grpc-go appends its own name and version (v1.23 vendors
// grpc-go 1.82.1).
constexpr std::string_view kUserAgent = "kube-probe// grpc-go/1.82.1";

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

std::optional<std::uint64_t> get_varint(std::string_view& in) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  return std::nullopt;
}

}  // namespace

std::string encode_health_check_request(std::string_view service) {
  std::string out;
  if (service.empty()) return out;  // proto3 leaves a default value out
  out.push_back(static_cast<char>((1 << 3) | 2));  // field 1, length-delimited
  put_varint(out, service.size());
  out.append(service);
  return out;
}

std::optional<std::uint64_t> decode_health_check_status(std::string_view message) {
  std::uint64_t status = 0;
  while (!message.empty()) {
    auto key = get_varint(message);
    if (!key) return std::nullopt;
    const auto field = *key >> 3;
    switch (*key & 7) {
      case 0: {  // varint
        auto v = get_varint(message);
        if (!v) return std::nullopt;
        if (field == 1) status = *v;  // the last one wins, as protobuf parsers do
        break;
      }
      case 1:  // 64-bit
      case 5: {  // 32-bit
        const std::size_t n = (*key & 7) == 1 ? 8 : 4;
        if (message.size() < n) return std::nullopt;
        message.remove_prefix(n);
        break;
      }
      case 2: {  // length-delimited: an unknown field, skipped
        auto n = get_varint(message);
        if (!n || *n > message.size()) return std::nullopt;
        message.remove_prefix(static_cast<std::size_t>(*n));
        break;
      }
      default:
        return std::nullopt;
    }
  }
  return status;
}

asio::awaitable<bool> grpc_health_check(tcp::socket& socket, const ReadinessProbeConfig& probe, Millis timeout) {
  GrpcClientSession session;
  std::string error;
  // grpc-go dials 127.0.0.1:port, which is also the authority it sends.
  GrpcRequest request{.path = "/grpc.health.v1.Health/Check",
                      .authority = "127.0.0.1:" + std::to_string(probe.port),
                      .user_agent = std::string(kUserAgent),
                      .message = encode_health_check_request(probe.grpc_service),
                      .timeout = timeout};
  if (!session.start(request, error)) co_return false;
  std::array<char, 16 * 1024> buf;
  while (true) {
    while (true) {
      auto out = session.output(error);
      if (!out) co_return false;
      if (out->empty()) break;
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(out->data(), out->size()), use_nothrow);
      (void)n;
      if (ec) co_return false;
    }
    if (session.call_ended()) break;
    if (!session.wants_read()) co_return false;
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf), use_nothrow);
    if (ec || !session.feed(std::string_view(buf.data(), n), error)) co_return false;
  }
  if (!session.response().ok()) co_return false;
  auto status = decode_health_check_status(session.response().message);
  co_return status && *status == kHealthServing;
}

}  // namespace sluice::proxy
