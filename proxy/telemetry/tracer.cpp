// Tracer; see tracer.h. Attribute names follow OpenTelemetry's HTTP semantic conventions, as otelhttp
// (which queue-proxy uses) writes them.
#include "proxy/telemetry/tracer.h"

namespace sluice::proxy::telemetry {
namespace {

std::uint64_t unix_nano(std::chrono::system_clock::time_point t) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

SpanAttribute text(std::string key, std::string_view value) {
  return SpanAttribute{.key = std::move(key), .text = std::string(value)};
}
SpanAttribute number(std::string key, std::int64_t value) {
  return SpanAttribute{.key = std::move(key), .number = value, .is_number = true};
}

}  // namespace

Tracer::Tracer(TracingConfig config, std::uint16_t app_port)
    : rate_(config.sampling_rate), app_address_("127.0.0.1"), app_port_(app_port), exporter_(std::move(config)) {}

std::optional<ExchangeSpan> Tracer::begin(http::request_header<>& req, ExchangeRecord& record) {
  if (rate_ <= 0) return std::nullopt;
  auto parent = extract_parent(req);
  ExchangeSpan s;
  s.trace_id = parent ? parent->trace_id : new_trace_id();
  if (!should_sample(rate_, parent, s.trace_id)) return std::nullopt;
  if (parent) {
    s.parent = parent->parent_span_id;
    s.trace_state = parent->trace_state;
  }
  s.server_span = new_span_id();
  s.client_span = new_span_id();
  s.wall_start = std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                        Clock::now() - record.start);
  req.set("traceparent", format_traceparent(s.trace_id, s.client_span, true));
  record.span_trace_id = hex(s.trace_id);
  return s;
}

void Tracer::end(const ExchangeSpan& s, const http::request_header<>& req, const ExchangeRecord& record,
                 Clock::time_point end) {
  auto wall = [&](Clock::time_point t) {
    return unix_nano(s.wall_start + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - record.start));
  };
  const std::string_view target = req.target();
  const auto query = target.find('?');
  const std::string_view method = req.method_string();
  const int status = record.status;

  FinishedSpan server;
  server.trace_id = s.trace_id;
  server.span_id = s.server_span;
  server.has_parent = s.parent.has_value();
  if (s.parent) server.parent_span_id = *s.parent;
  server.trace_state = s.trace_state;
  server.name = "queue";  // otelhttp.NewHandler(…, "queue") in queue-proxy
  server.kind = FinishedSpan::Kind::server;
  server.start_unix_nano = wall(record.start);
  server.end_unix_nano = wall(end);
  server.attributes = {text("http.request.method", method),
                       text("url.path", target.substr(0, query)),
                       text("url.scheme", "http"),
                       text("server.address", req[http::field::host]),
                       text("network.protocol.version", record.protocol == "HTTP/2.0" ? "2" : "1.1"),
                       text("client.address", record.peer.substr(0, record.peer.rfind(':'))),
                       number("http.response.status_code", status)};
  if (query != std::string_view::npos) server.attributes.push_back(text("url.query", target.substr(query + 1)));
  if (auto ua = req[http::field::user_agent]; !ua.empty()) server.attributes.push_back(text("user_agent.original", ua));
  server.error = status >= 500;

  if (record.upstream_start != Clock::time_point{}) {
    FinishedSpan client;
    client.trace_id = s.trace_id;
    client.span_id = s.client_span;
    client.parent_span_id = s.server_span;
    client.has_parent = true;
    client.trace_state = s.trace_state;
    client.name = std::string(method);
    client.kind = FinishedSpan::Kind::client;
    client.start_unix_nano = wall(record.upstream_start);
    client.end_unix_nano = wall(end);
    client.attributes = {text("http.request.method", method),
                         text("url.full", "http://" + app_address_ + ":" + std::to_string(app_port_) + std::string(target)),
                         text("server.address", app_address_), number("server.port", app_port_),
                         number("http.response.status_code", status)};
    client.error = status >= 400 || status == 0;
    exporter_.enqueue(std::move(client));
  }
  exporter_.enqueue(std::move(server));
}

}  // namespace sluice::proxy::telemetry
