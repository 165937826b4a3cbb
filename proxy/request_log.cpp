// Request-log lines; field names follow Knative's default template (Google Cloud's httpRequest shape).
#include "proxy/request_log.h"

#include <charconv>
#include <cstdio>

#include "common/log.h"

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
  append_json_string(out, r.trace_id);
  out += ",\"requestId\":";
  append_json_string(out, r.request_id);
  out += '}';
}

void write_request_log(const ExchangeRecord& r, std::string_view server_ip) {
  std::string line;
  line.reserve(512);
  format_request_log(line, r, Clock::now(), server_ip);
  log::write_line(line);
}

}  // namespace sluice::proxy
