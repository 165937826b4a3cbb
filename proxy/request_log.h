// The request log: one JSON line per exchange, in the shape of Knative's default request-log template.
#pragma once

#include <string>

#include "proxy/exchange.h"

namespace sluice::proxy {

// Appends the line (without newline) for `r`, finished at `end`, to `out`.
void format_request_log(std::string& out, const ExchangeRecord& r, Clock::time_point end,
                        std::string_view server_ip);
void write_request_log(const ExchangeRecord& r, std::string_view server_ip);

}  // namespace sluice::proxy
