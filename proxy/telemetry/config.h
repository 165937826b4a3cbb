// Where traces and request metrics go (OBSERVABILITY_CONFIG.tracing / .requestMetrics, or the v1.12
// TRACING_CONFIG_* variables): a plain struct, filled once in app/.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::proxy::telemetry {

// How spans or metrics leave: OTLP protobuf over gRPC or HTTP, Zipkin v2 JSON over HTTP, or (spans only)
// JSON lines on stdout as OpenTelemetry's stdouttrace exporter prints them.
enum class ExportProtocol { none, otlp_grpc, otlp_http, zipkin, stdout_json };

struct Endpoint {
  bool tls = false;  // https:// (and Knative's reading of a scheme-less endpoint)
  std::string host;
  std::uint16_t port = 0;
  std::string path;  // HTTP target; for gRPC the method path is fixed
  std::string text() const {
    return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port) + path;
  }
};

// Resource attributes, as Knative's queue-proxy sets them (sorted by key, as OpenTelemetry's Go SDK keeps them).
using Attributes = std::vector<std::pair<std::string, std::string>>;

struct TracingConfig {
  ExportProtocol protocol = ExportProtocol::none;
  Endpoint endpoint;
  double sampling_rate = 0;  // >= 1: every request; <= 0: none; else by trace id, a sampled parent wins
  // A B3 parent continues the trace too. Only the v1.12 Zipkin set-up: from v1.19 on queue-proxy reads
  // W3C traceparent (and baggage) only.
  bool b3_parents = false;
  std::size_t queue_spans = 2048;  // spans waiting for export; beyond, dropped and counted
  std::size_t batch_spans = 512;   // spans per export request
  std::chrono::milliseconds batch_delay{1000};    // longest wait before a partial batch goes
  std::chrono::milliseconds export_timeout{5000};  // connect + send + answer, per request
  std::string service_name;  // Zipkin localEndpoint.serviceName / OTLP service.name
  Attributes resource;
};

struct MetricsPushConfig {
  ExportProtocol protocol = ExportProtocol::none;  // otlp_grpc or otlp_http; none: not pushed
  Endpoint endpoint;
  std::chrono::milliseconds interval{60'000};  // requestMetrics.exportInterval (OTel's default 60 s)
  std::chrono::milliseconds export_timeout{5000};
  Attributes resource;
};

}  // namespace sluice::proxy::telemetry
