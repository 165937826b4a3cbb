// The failure table; see failure.h.
#include "proxy/forward/failure.h"

namespace sluice::proxy {

int failure_status(Failure f) {
  switch (f) {
    case Failure::upstream_connect:
    case Failure::upstream: return 502;
    case Failure::timed_out: return 504;
    case Failure::body_too_large: return 413;
    case Failure::bad_request_body: return 400;
    case Failure::client_gone: return kClientClosedRequest;
  }
  return 502;
}

LocalAnswer failure_answer(Failure f, error_code ec) {
  auto status = static_cast<unsigned>(failure_status(f));
  switch (f) {
    case Failure::upstream_connect:
      return {.status = status, .body = "bad gateway: upstream connect error: " + ec.message(), .nosniff = true};
    case Failure::upstream:
      return {.status = status, .body = "bad gateway: upstream: " + ec.message(), .nosniff = true};
    case Failure::timed_out:  // as queue-proxy's timeout handler writes it; the client's connection goes on
      return {.status = status, .body = "request timeout", .exact_body = true};
    case Failure::body_too_large:
      return {.status = status, .body = "request body too large", .close = true};
    case Failure::bad_request_body:
      return {.status = status, .body = "bad request: " + ec.message(), .close = true};
    case Failure::client_gone:
      return {.status = status, .close = true};
  }
  return {.status = 502, .body = "bad gateway"};
}

}  // namespace sluice::proxy
