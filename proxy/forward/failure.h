// Every way an exchange can fail before its response starts, and what the client gets for it: one table
// for every protocol pair. After the response started there is no status left to send; the response is
// cut instead (HTTP/1.1 closes the connection, HTTP/2 resets the stream).
#pragma once

#include "proxy/exchange/exchange.h"

namespace sluice::proxy {

enum class Failure {
  upstream_connect,   // no connection to the app (refused, connect timeout)
  upstream,           // the app failed before a response head (closed, reset, malformed or oversized head)
  timed_out,          // the request, response-start or idle deadline passed
  body_too_large,     // the request body grew past the limit (SLUICE_MAX_BODY_BYTES)
  bad_request_body,   // the client's body framing broke (a malformed chunk)
  client_gone,        // the client went away: nothing is sent, the exchange is logged as 499
};

// nginx's code for a request whose client closed the connection before the response.
inline constexpr int kClientClosedRequest = 499;

int failure_status(Failure f);
// The answer for `f`; `ec` says what went wrong on the way (its text is part of 502 bodies).
LocalAnswer failure_answer(Failure f, error_code ec);

}  // namespace sluice::proxy
