// Tracer; see tracer.h. Names, attributes and statuses are otelhttp v0.69's (HTTP semantic conventions
// v1.41) and queue-proxy's, in the order otelhttp sets them.
#include "proxy/telemetry/tracer.h"

#include <algorithm>
#include <array>

#include "gotemplate/url.h"
#include "proxy/io/field_value.h"

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

constexpr std::array<std::string_view, 9> kMethods = {"CONNECT", "DELETE", "GET",   "HEAD", "OPTIONS",
                                                      "PATCH",   "POST",   "PUT",   "TRACE"};

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool known_method(std::string_view m) { return std::find(kMethods.begin(), kMethods.end(), m) != kMethods.end(); }

// http.request.method, and http.request.method.original when the method is not exactly a known one.
void add_method(std::vector<SpanAttribute>& attrs, std::string_view method) {
  if (known_method(method)) {
    attrs.push_back(text("http.request.method", method));
    return;
  }
  auto up = upper(method);
  attrs.push_back(text("http.request.method", !method.empty() && known_method(up) ? std::string_view(up) : "_OTHER"));
  if (!method.empty()) attrs.push_back(text("http.request.method.original", method));
}

// otelhttp's SplitHostPort: port -1 when there is none or it does not parse; no host for a bad authority.
std::pair<std::string_view, int> split_host_port(std::string_view hp) {
  if (hp.starts_with('[')) {
    auto close = hp.rfind(']');
    if (close == std::string_view::npos) return {{}, -1};
    if (hp.find(':', close) == std::string_view::npos) return {hp.substr(1, close - 1), -1};
    if (close + 1 >= hp.size() || hp[close + 1] != ':') return {{}, -1};
    auto port = hp.substr(close + 2);
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || (p = p * 10 + (c - '0')) > 65535) return {hp.substr(1, close - 1), -1};
    }
    return {hp.substr(1, close - 1), port.empty() ? -1 : p};
  }
  auto colon = hp.rfind(':');
  if (colon == std::string_view::npos) return {hp, -1};
  if (hp.find(':') != colon) return {{}, -1};  // more than one colon without brackets
  auto port = hp.substr(colon + 1);
  int p = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || (p = p * 10 + (c - '0')) > 65535) return {hp.substr(0, colon), -1};
  }
  return {hp.substr(0, colon), port.empty() ? -1 : p};
}

// The route's tag as queue-proxy's route-tag handler names it (kn.route.tag).
std::string_view route_tag(const http::request_header<>& req) {
  auto tag = field_value(req, "Knative-Serving-Tag");
  auto default_route = field_value(req, "Knative-Serving-Default-Route");
  if (tag.empty()) return default_route.empty() ? "kn:disabled" : "kn:default";
  if (default_route == "true") return "kn:undefined";
  return tag;
}

// Go's r.Proto after "HTTP/": "1.0", "1.1", or "2.0" for HTTP/2.
std::string_view protocol_version(const ExchangeRecord& record, const http::request_header<>& req) {
  if (record.protocol == "HTTP/2.0") return "2.0";
  return req.version() == 10 ? "1.0" : "1.1";
}

}  // namespace

Tracer::Tracer(TracingConfig config, std::uint16_t app_port)
    : rate_(config.sampling_rate),
      b3_parents_(config.b3_parents),
      app_address_("127.0.0.1"),
      app_port_(app_port),
      exporter_(std::move(config)) {}

std::optional<ExchangeSpan> Tracer::begin(http::request_header<>& req, ExchangeRecord& record, bool tls) {
  auto parent = extract_parent(req, b3_parents_);
  const TraceId trace = parent ? parent->trace_id : new_trace_id();
  const std::uint8_t random_bit = parent ? parent->flags & 2 : 0;
  const SpanId client = new_span_id();
  if (!should_sample(rate_, parent, trace)) {
    req.set("traceparent", format_traceparent(trace, client, random_bit));
    return std::nullopt;
  }
  ExchangeSpan s;
  s.trace_id = trace;
  if (parent) {
    s.parent = parent->parent_span_id;
    s.parent_flags = parent->flags;
    s.trace_state = parent->trace_state;
  }
  s.flags = random_bit | 1;
  s.server_span = new_span_id();
  s.proxy_span = new_span_id();
  s.client_span = client;
  s.tls = tls;
  s.wall_start = std::chrono::system_clock::now() - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                        Clock::now() - record.start);
  req.set("traceparent", format_traceparent(s.trace_id, s.client_span, s.flags));
  record.span_trace_id = hex(s.trace_id);
  return s;
}

void Tracer::end(const ExchangeSpan& s, const http::request_header<>& req, const ExchangeRecord& record,
                 Clock::time_point forwarded, Clock::time_point end) {
  auto wall = [&](Clock::time_point t) {
    return unix_nano(s.wall_start + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - record.start));
  };
  auto span = [&](std::string name, FinishedSpan::Kind kind, SpanScope scope, const SpanId& id, const SpanId& parent) {
    FinishedSpan f;
    f.trace_id = s.trace_id;
    f.span_id = id;
    f.parent_span_id = parent;
    f.has_parent = true;
    f.trace_flags = f.parent_flags = s.flags;
    f.trace_state = s.trace_state;
    f.name = std::move(name);
    f.kind = kind;
    f.scope = scope;
    return f;
  };
  const std::string_view method = req.method_string();
  const std::string_view version = protocol_version(record, req);
  const bool queued = record.queue_exit != Clock::time_point{};
  const bool asked = record.upstream_start != Clock::time_point{};
  const SpanId wait_id = queued ? new_span_id() : SpanId{};
  gotemplate::Scratch scratch;  // for an unescaped path
  const auto url = gotemplate::parse_request_uri(req.target(), scratch);

  // Enqueued in the order queue-proxy ends them: wait, client, proxy, server.
  if (queued) {
    auto wait = span("kn.queueproxy.wait", FinishedSpan::Kind::internal, SpanScope::queue, wait_id, s.proxy_span);
    wait.start_unix_nano = wall(record.start);
    wait.end_unix_nano = wall(record.queue_exit);
    wait.child_spans = asked ? 1 : 0;
    exporter_.enqueue(std::move(wait));
  }
  if (asked) {
    auto client = span("HTTP " + std::string(method), FinishedSpan::Kind::client, SpanScope::otelhttp, s.client_span,
                       queued ? wait_id : s.proxy_span);
    client.start_unix_nano = wall(record.upstream_start);
    client.end_unix_nano = wall(forwarded);
    auto& a = client.attributes;
    add_method(a, method);
    // The URL queue-proxy's reverse proxy asks the app for: the request's path and query on the app's address.
    auto to_app = url;
    const std::string authority = app_address_ + ":" + std::to_string(app_port_);
    to_app.scheme = "http";
    to_app.host = authority;
    to_app.has_user = false;
    std::string full;
    gotemplate::append_url_string(full, to_app);
    a.push_back(text("url.full", full));
    a.push_back(text("server.address", app_address_));
    if (app_port_ != 80) a.push_back(number("server.port", app_port_));
    a.push_back(text("network.protocol.version", version));
    const int status = record.app_status;
    if (status > 0) {
      a.push_back(number("http.response.status_code", status));
      if (status >= 400) a.push_back(text("error.type", std::to_string(status)));
      client.error = status < 100 || status >= 400;
      if (status < 100 || status >= 600) client.status_description = "Invalid HTTP status code " + std::to_string(status);
    } else {
      // The app gave no answer: otelhttp names the Go error's type; sluice has none, so semconv's fallback.
      a.push_back(text("error.type", "_OTHER"));
      client.error = true;
      client.status_description = record.app_error ? record.app_error.message() : "no response from the app";
    }
    exporter_.enqueue(std::move(client));
  }

  auto proxy = span("kn.queueproxy.proxy", FinishedSpan::Kind::internal, SpanScope::queue, s.proxy_span, s.server_span);
  proxy.start_unix_nano = wall(record.start);
  proxy.end_unix_nano = wall(forwarded);
  proxy.child_spans = queued || asked ? 1 : 0;
  exporter_.enqueue(std::move(proxy));

  const std::string name = upper(method);
  auto server = span(known_method(name) ? name : "HTTP", FinishedSpan::Kind::server, SpanScope::otelhttp,
                     s.server_span, SpanId{});
  server.has_parent = s.parent.has_value();
  server.remote_parent = server.has_parent;
  if (s.parent) server.parent_span_id = *s.parent;
  server.parent_flags = s.parent_flags;
  server.start_unix_nano = wall(record.start);
  server.end_unix_nano = wall(end);
  server.child_spans = 1;
  auto& a = server.attributes;
  const auto [host, port] = split_host_port(field_value(req, "Host"));
  a.push_back(text("server.address", host));
  if (port > 0 && port != (s.tls ? 443 : 80)) a.push_back(number("server.port", port));
  add_method(a, method);
  a.push_back(text("url.scheme", s.tls ? "https" : "http"));
  const auto [peer, peer_port] = split_host_port(record.peer);
  if (!peer.empty()) {
    a.push_back(text("network.peer.address", peer));
    if (peer_port > 0) a.push_back(number("network.peer.port", peer_port));
  }
  if (auto ua = field_value(req, "User-Agent"); !ua.empty()) a.push_back(text("user_agent.original", ua));
  auto client_address = field_value(req, "X-Forwarded-For");
  client_address = client_address.substr(0, client_address.find(','));
  if (client_address.empty()) client_address = peer;
  if (!client_address.empty()) a.push_back(text("client.address", client_address));
  if (!url.path.empty()) a.push_back(text("url.path", url.path));
  a.push_back(text("network.protocol.version", version));
  a.push_back(text("kn.route.tag", route_tag(req)));
  if (record.request_bytes > 0) a.push_back(number("http.request.body.size", static_cast<std::int64_t>(record.request_bytes)));
  if (record.response_bytes > 0)
    a.push_back(number("http.response.body.size", static_cast<std::int64_t>(record.response_bytes)));
  const int status = record.status;
  if (status > 0) a.push_back(number("http.response.status_code", status));
  server.error = status < 100 || status >= 500;
  if (status < 100 || status >= 600) server.status_description = "Invalid HTTP status code " + std::to_string(status);
  exporter_.enqueue(std::move(server));
}

}  // namespace sluice::proxy::telemetry
