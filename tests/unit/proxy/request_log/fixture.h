// One exchange to render request-log templates over, as queue-proxy would see it: a POST with a query,
// headers in two spellings of one name, a 201 answer of 7 bytes after 1.234 s.
#pragma once

#include <string>

#include "proxy/request_log/template.h"

namespace sluice::proxy::testing {

struct RequestLogFixture {
  RequestLogFixture() {
    req.method(http::verb::post);
    req.target("/path?q=\"x\"&a=<b>");
    req.set(http::field::host, "hello.default.example.com");
    req.set(http::field::user_agent, "curl/8.0");
    req.set(http::field::content_length, "42");
    req.insert("x-b3-traceid", "b3trace");
    req.insert("X-Custom", "one");
    req.insert("x-custom", "two");
    record.start = Clock::now();
    record.peer = "10.1.2.3:5555";
    record.status = 201;
    record.response_bytes = 7;
    revision = {.name = "hello-00001", .namespace_name = "default", .service = "hello", .configuration = "hello-cfg",
                .pod_name = "hello-00001-deployment-x", .pod_ip = "10.0.0.9"};
  }
  // What queue-proxy writes for the exchange, newline included.
  std::string raw(std::string_view text, std::string_view trace = "") {
    RequestLogTemplate t(text);
    std::string out;
    t.render(out, RequestLogInput{.record = record, .request = &req, .end = record.start + latency,
                                  .revision = revision, .trace_id = trace});
    return out;
  }
  // The line without the newline Knative adds to a template.
  std::string render(std::string_view text, std::string_view trace = "") {
    auto out = raw(text, trace);
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  static constexpr const char* kErrorLine =
      "Invalid request log template: method: POST, response code: 201, latency: 1.234, url: /path?q=\"x\"&a=<b>";

  http::request_header<> req;
  ExchangeRecord record;
  RevisionInfo revision;
  Clock::duration latency = std::chrono::milliseconds(1234);
};

}  // namespace sluice::proxy::testing
