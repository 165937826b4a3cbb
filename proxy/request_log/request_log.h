// The request log: one JSON line per exchange, in the shape of Knative's default request-log template.
#pragma once

#include <string>

#include "proxy/exchange/config.h"
#include "proxy/exchange/exchange.h"

namespace sluice::proxy {

// Appends the line (without newline) for `r`, finished at `end`, to `out`.
void format_request_log(std::string& out, const ExchangeRecord& r, Clock::time_point end,
                        std::string_view server_ip);
// The line as `config` shapes it (its template, or the default shape), written to stdout. `req` is the
// request's head, null when it could not be parsed.
void write_request_log(const ExchangeRecord& r, const http::request_header<>* req, const ProxyConfig& config);

}  // namespace sluice::proxy
