// What one request/response exchange was, as the request log and (later) the stats see it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/asio.h"

namespace sluice::proxy {

struct ExchangeRecord {
  Clock::time_point start;
  std::string method;
  std::string target;
  std::string request_id;
  std::string user_agent;
  std::string referer;
  std::string trace_id;  // X-B3-TraceId, as Knative's default request-log template prints it
  std::string peer;      // ip:port of the client
  std::string_view protocol = "HTTP/1.1";
  int status = 0;
  std::uint64_t request_bytes = 0;   // body bytes received from the client
  std::uint64_t response_bytes = 0;  // body bytes sent to the client
};

}  // namespace sluice::proxy
