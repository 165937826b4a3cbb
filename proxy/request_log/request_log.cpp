// Request-log lines; field names follow Knative's default template (Google Cloud's httpRequest shape).
#include "proxy/request_log/request_log.h"

#include <charconv>
#include <cstdio>

#include "common/log.h"
#include "proxy/request_log/template.h"

namespace sluice::proxy {
namespace {

void append_uint(std::string& out, std::uint64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  out.append(tmp, r.ptr);
}

}  // namespace

void format_request_log(std::string& out, const ExchangeRecord& r, Clock::time_point end,
                        std::string_view server_ip) {
  using log::append_json_string;
  out += "{\"httpRequest\":{\"requestMethod\":";
  append_json_string(out, r.method);
  out += ",\"requestUrl\":";
  append_json_string(out, r.target);
  out += ",\"requestSize\":\"";
  append_uint(out, r.request_bytes);
  out += "\",\"status\":";
  append_uint(out, static_cast<std::uint64_t>(r.status));
  out += ",\"responseSize\":\"";
  append_uint(out, r.response_bytes);
  out += "\",\"userAgent\":";
  append_json_string(out, r.user_agent);
  out += ",\"remoteIp\":";
  append_json_string(out, r.peer);
  out += ",\"serverIp\":";
  append_json_string(out, server_ip);
  out += ",\"referer\":";
  append_json_string(out, r.referer);
  char latency[32];
  double secs = std::chrono::duration<double>(end - r.start).count();
  int n = std::snprintf(latency, sizeof latency, "\"%.9fs\"", secs);
  out += ",\"latency\":";
  out.append(latency, static_cast<std::size_t>(n));
  out += ",\"protocol\":";
  append_json_string(out, r.protocol);
  out += "},\"traceId\":";
  append_json_string(out, r.span_trace_id.empty() ? r.trace_id : r.span_trace_id);
  out += ",\"requestId\":";
  append_json_string(out, r.request_id);
  out += '}';
}

void write_request_log(const ExchangeRecord& r, const http::request_header<>* req, const ProxyConfig& config) {
  std::string line;
  line.reserve(512);
  const auto end = Clock::now();
  if (!config.request_log_template) {
    format_request_log(line, r, end, config.pod_ip);
  } else {
    // Knative's .TraceID: the exported span's (the record's, when tracing is on), else the client's.
    std::string_view trace_id = r.span_trace_id;
    if (trace_id.empty()) trace_id = req ? trace_id_of(*req) : std::string_view(r.trace_id);
    config.request_log_template->render(line, RequestLogInput{.record = r, .request = req, .end = end,
                                                              .revision = config.revision, .trace_id = trace_id});
    if (!line.empty() && line.back() == '\n') line.pop_back();  // write_line ends the line (Knative adds one)
  }
  log::write_line(line);
}

}  // namespace sluice::proxy
