// A gRPC unary call over h2c (or HTTP/2 over TLS, ALPN h2, for an https:// endpoint), framed by hand
// (GrpcClientSession, proxy/codec/h2/grpc_client_session.h) on a kept-alive nghttp2 client session; success is
// grpc-status 0 in the trailers.
#pragma once

#include <memory>
#include <string>

#include "proxy/telemetry/transport.h"

namespace sluice::proxy::telemetry {

std::unique_ptr<ExportTransport> make_grpc_transport(const Endpoint& endpoint, std::string path);

}  // namespace sluice::proxy::telemetry
