// How an export request reaches a collector: HTTP/1.1 POST (OTLP/HTTP protobuf, Zipkin JSON) or a gRPC
// unary call framed by hand over HTTP/2 (nghttp2), so the sidecar links no gRPC library. One connection,
// kept between exports and made again after a failure. Export thread only.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "proxy/telemetry/config.h"
#include "proxy/telemetry/timed_socket.h"

namespace sluice::proxy::telemetry {

class ExportTransport {
 public:
  virtual ~ExportTransport() = default;
  // Sends one request body; true when the collector accepted it (2xx, grpc-status 0). Ends by `deadline`.
  virtual bool send(std::string_view body, ExportClock::time_point deadline, std::string& error) = 0;
};

// `grpc_path`: the RPC (/opentelemetry.proto.collector.trace.v1.TraceService/Export) for gRPC;
// `content_type`: the HTTP body's (application/x-protobuf, application/json).
std::unique_ptr<ExportTransport> make_transport(ExportProtocol protocol, const Endpoint& endpoint,
                                                std::string grpc_path, std::string content_type);

}  // namespace sluice::proxy::telemetry
