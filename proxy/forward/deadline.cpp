// Exchange deadlines; see deadline.h.
#include "proxy/forward/deadline.h"

namespace sluice::proxy {

ExchangeDeadline::ExchangeDeadline(net::Watchdogs& watchdogs, const Timeouts& timeouts, Clock::time_point start,
                                   Owner& owner)
    : timeouts_(timeouts), owner_(owner), start_(start), last_write_(start), watchdog_(watchdogs, *this) {
  watchdog_.rearm();
}

void ExchangeDeadline::tunnel() {
  tunnel_ = true;
  last_write_ = Clock::now();
}

Clock::time_point ExchangeDeadline::next_deadline() const {
  auto d = Clock::time_point::max();
  if (passed_) return d;
  auto consider = [&d](Clock::time_point base, Millis limit) {
    if (limit.count() > 0) d = std::min(d, base + limit);
  };
  if (!tunnel_) {
    consider(start_, request_limit_.count() > 0 ? request_limit_ : timeouts_.request);
    if (!response_started_) consider(start_, timeouts_.response_start);
  }
  consider(last_write_, timeouts_.idle);
  return d;
}

void ExchangeDeadline::limit_request(Millis request) {
  if (request.count() <= 0 || (timeouts_.request.count() > 0 && request >= timeouts_.request)) return;
  request_limit_ = request;
  watchdog_.rearm();
}

void ExchangeDeadline::on_deadline() {
  passed_ = true;
  owner_.deadline_passed();
}

}  // namespace sluice::proxy
