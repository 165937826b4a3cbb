// gRPC unary calls over HTTP/2 in cleartext, framed by hand on an nghttp2 client session that does no
// I/O: the caller writes what output() gives to its socket and feeds back what it reads. One framing for
// the export thread (a blocking socket, the session kept between exports) and the readiness probe (an
// Asio socket, one call per connection), so the sidecar links no gRPC library.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct nghttp2_session;

namespace sluice::proxy {

struct GrpcRequest {
  std::string path;       // "/package.Service/Method"
  std::string authority;  // host:port
  bool tls = false;       // :scheme https (over TLS with ALPN h2), else http (h2c)
  std::string user_agent;
  std::string message;    // the request message, serialized
  std::chrono::milliseconds timeout{0};  // sent as grpc-timeout when not zero
};

struct GrpcResponse {
  int http_status = 0;        // 0: no response head came (the stream was refused or reset)
  std::string grpc_status;    // from the trailers, or a trailers-only response; empty when missing
  std::string grpc_message;
  std::string message;        // the first response message, unframed
  bool malformed = false;     // a compressed, truncated or oversized message
  bool ok() const { return http_status == 200 && grpc_status == "0" && !malformed; }
};

class GrpcClientSession {
 public:
  GrpcClientSession();  // queues the connection preface and SETTINGS
  ~GrpcClientSession();
  GrpcClientSession(const GrpcClientSession&) = delete;
  GrpcClientSession& operator=(const GrpcClientSession&) = delete;

  // Starts a call; one at a time. false (with `error`) when the session takes no new stream.
  bool start(const GrpcRequest& request, std::string& error);
  // The next bytes to write (valid until the next call; empty when there is nothing to write), or
  // nullopt with `error` when the session failed.
  std::optional<std::string_view> output(std::string& error);
  // Bytes read from the socket; false (with `error`) when they broke the session.
  bool feed(std::string_view bytes, std::string& error);

  bool call_ended() const { return ended_; }
  const GrpcResponse& response() const { return response_; }
  // The peer may still send something this session wants (false after GOAWAY with no call open).
  bool wants_read() const;
  // A new call may start here (no GOAWAY, stream ids left).
  bool accepts_calls() const;

 private:
  struct Callbacks;  // nghttp2's, in the .cpp
  friend struct Callbacks;
  void unframe();

  nghttp2_session* session_ = nullptr;
  std::int32_t stream_ = -1;
  std::string body_;        // the request's framed message
  std::size_t sent_ = 0;
  std::string received_;    // the response's DATA
  GrpcResponse response_;
  bool ended_ = false;
};

}  // namespace sluice::proxy
