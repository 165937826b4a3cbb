// Knative's request-log template (SERVING_REQUEST_LOG_TEMPLATE / OBSERVABILITY_CONFIG.requestLogTemplate):
// Go's text/template (gotemplate/) over Knative's RequestLogTemplateInput (.Request, .Response, .Revision,
// .TraceID; data.h). Parsed once at start-up; rendering allocates only the output and the values it
// prints, in scratch space each thread reuses.
#pragma once

#include <string>
#include <string_view>

#include "gotemplate/template.h"
#include "proxy/exchange/config.h"
#include "proxy/exchange/exchange.h"

namespace sluice::proxy {

// What one log line is made from.
struct RequestLogInput {
  const ExchangeRecord& record;
  const http::request_header<>* request;  // null when the request could not be parsed
  Clock::time_point end;
  const RevisionInfo& revision;
  std::string_view trace_id;  // .TraceID: the exported span's, else traceparent's, else X-B3-TraceId
};

class RequestLogTemplate {
 public:
  // Parses `text` as queue-proxy does (template.New("requestLog").Parse, after adding the newline Knative
  // adds when the text has none). Throws std::invalid_argument with Go's message where Go's Parse fails.
  // Fields are not checked here: a missing one (.Request.Nope) fails each line, as in Go.
  explicit RequestLogTemplate(std::string_view text);

  // Appends what queue-proxy writes for the exchange (ending in the template's newline). When the template
  // fails to run, appends Knative's own line instead, "Invalid request log template: method: …, response
  // code: …, latency: …, url: …\n", and returns false.
  bool render(std::string& out, const RequestLogInput& in) const;

 private:
  gotemplate::Template template_;
};

// The trace id Knative's request log shows for a request: traceparent's, else X-B3-TraceId.
std::string_view trace_id_of(const http::request_header<>& req);

}  // namespace sluice::proxy
