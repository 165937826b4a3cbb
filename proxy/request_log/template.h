// Knative's request-log template (SERVING_REQUEST_LOG_TEMPLATE / OBSERVABILITY_CONFIG.requestLogTemplate):
// the subset of Go's text/template that request-log templates use, over the fields Knative documents
// (.Request.*, .Response.*, .Revision.*, .TraceID). Parsed once at start-up; rendering allocates only the
// output and the values it prints.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "proxy/config.h"
#include "proxy/exchange.h"

namespace sluice::proxy {

// What one log line is made from.
struct RequestLogInput {
  const ExchangeRecord& record;
  const http::request_header<>* request;  // null when the request could not be parsed
  Clock::time_point end;
  const RevisionInfo& revision;
  std::string_view trace_id;  // .TraceID: the exported span's, else traceparent's, else X-B3-TraceId
};

namespace request_log {
struct Program;
}

class RequestLogTemplate {
 public:
  // Throws std::invalid_argument saying what is wrong and where (byte offset). Fields outside the
  // documented set are refused here (Go would fail on every request instead).
  explicit RequestLogTemplate(std::string_view text);
  ~RequestLogTemplate();
  RequestLogTemplate(RequestLogTemplate&&) noexcept;
  RequestLogTemplate& operator=(RequestLogTemplate&&) noexcept;

  // Appends the rendered text to `out`. On an evaluation error (index of a non-map, say) appends what
  // Knative's queue-proxy writes then: "Invalid request log template: method: …" and returns false.
  bool render(std::string& out, const RequestLogInput& in) const;

 private:
  std::unique_ptr<request_log::Program> program_;
};

// The trace id Knative's request log shows for a request: traceparent's, else X-B3-TraceId.
std::string_view trace_id_of(const http::request_header<>& req);

}  // namespace sluice::proxy
