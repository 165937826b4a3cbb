// otelhttp's metrics as queue-proxy >= 1.19 serves them on :9091: its handler's http.server.* families (every
// request but health checks: duration, request and response body sizes) and its transport's http.client.*
// families (every exchange with the app: time to the response head, request body bytes sent by then), with
// otelhttp's attributes, the route tag Knative's handler adds, OpenTelemetry's default buckets, and the SDK's
// limit of 2000 attribute sets per instrument (the rest fold into one otel_metric_overflow series).
// Recording is a hash, a few relaxed loads to find the series and three atomic adds per histogram; a new
// attribute set is created once, under a lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::metrics {

enum class HttpVersion : std::uint8_t { v1_0, v1_1, v2 };

// Why the app gave no response head, as the Go type of the error otelhttp's transport names in error_type.
enum class AppError : std::uint8_t {
  none,
  dial,      // the connection was refused or failed: net.OpError
  deadline,  // the request's timeout passed: context.deadlineExceededError
  canceled,  // the client went away: context.Canceled, an errors.errorString
  other,     // anything else: _OTHER
};

struct HttpServerSample {
  std::string_view method;
  int status = 0;
  std::string_view route_tag;
  HttpVersion version = HttpVersion::v1_1;
  std::string_view host;  // the request's Host (:authority), port included when it had one
  bool tls = false;
  std::uint64_t request_body_bytes = 0;
  std::uint64_t response_body_bytes = 0;
  double seconds = 0;
};

struct HttpClientSample {
  std::string_view method;
  int status = 0;  // 0: no response head (then `error` says why)
  AppError error = AppError::none;
  std::string_view route_tag;
  HttpVersion version = HttpVersion::v1_1;  // the client's request's: Go's proxy keeps it on the outgoing one
  std::uint64_t request_body_bytes = 0;
  double seconds = 0;
};

// Knative's route tag of a request (queue-proxy's routetag_handler.go): the Knative-Serving-Tag value;
// kn:undefined for a tag on the default route; kn:default for the default route without a tag; kn:disabled
// when neither header came (tag-header routing is off).
std::string_view knative_route_tag(std::string_view tag, std::string_view default_route);

class HttpMetrics {
 public:
  explicit HttpMetrics(std::uint16_t app_port);  // the app is at 127.0.0.1:app_port
  ~HttpMetrics();
  HttpMetrics(const HttpMetrics&) = delete;
  HttpMetrics& operator=(const HttpMetrics&) = delete;

  void record_server(const HttpServerSample& s);
  void record_client(const HttpClientSample& s);
  // The families that have a series, by name: http_client_* then http_server_*.
  void write(std::string& out) const;

  class SeriesTable;

 private:
  std::unique_ptr<SeriesTable> server_, client_;
  std::string app_port_;
};

}  // namespace sluice::metrics
