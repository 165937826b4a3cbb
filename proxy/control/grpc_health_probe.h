// A `grpc` readiness probe as queue-proxy runs it (pkg/queue/health GRPCProbe, through grpc-go):
// grpc.health.v1.Health/Check over h2c, ready only when the answer is SERVING. NOT_SERVING, UNKNOWN,
// SERVICE_UNKNOWN, any non-zero grpc-status (UNIMPLEMENTED: no health service) or a broken call is not ready.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "proxy/exchange/config.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

// One Check call on `socket` (connected to the probe's port); the caller bounds it by `timeout`, which
// goes to the server as grpc-timeout too.
asio::awaitable<bool> grpc_health_check(tcp::socket& socket, const ReadinessProbeConfig& probe, Millis timeout);

// grpc.health.v1's two messages, encoded by hand (one field each).
// HealthCheckRequest{string service = 1}.
std::string encode_health_check_request(std::string_view service);
// HealthCheckResponse{ServingStatus status = 1}: the status (0 when absent), nullopt when the bytes are
// not a protobuf message.
std::optional<std::uint64_t> decode_health_check_status(std::string_view message);

inline constexpr std::uint64_t kHealthServing = 1;

}  // namespace sluice::proxy
