// The deadlines of one exchange, whatever protocols carry it: the whole request (REVISION_TIMEOUT_SECONDS),
// the start of the response (REVISION_RESPONSE_START_TIMEOUT_SECONDS) and the idle gap since the last
// bytes went to the client (REVISION_IDLE_TIMEOUT_SECONDS). An upgraded exchange (a tunnel) keeps only the
// idle limit. One lazily re-armed timer enforces them; the owner is told once when one passes.
#pragma once

#include "common/watchdog.h"
#include "proxy/exchange/config.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

class ExchangeDeadline final : private net::Watchdog::Target {
 public:
  class Owner {
   public:
    virtual void deadline_passed() = 0;

   protected:
    ~Owner() = default;
  };

  ExchangeDeadline(net::Watchdogs& watchdogs, const Timeouts& timeouts, Clock::time_point start, Owner& owner);

  void response_started() { response_started_ = true; }
  void wrote() { last_write_ = Clock::now(); }  // bytes went to the client
  void tunnel();                                // upgraded: only the idle limit is left
  bool passed() const { return passed_; }
  // A shorter whole-exchange limit for this exchange (the gateway's per-service request timeout).
  void limit_request(Millis request);
  Clock::time_point& last_write() { return last_write_; }  // for a tunnel's byte pumps

 private:
  Clock::time_point next_deadline() const override;
  void on_deadline() override;

  const Timeouts& timeouts_;
  Owner& owner_;
  Clock::time_point start_;
  Clock::time_point last_write_;
  Millis request_limit_{0};  // 0: timeouts_.request
  bool response_started_ = false;
  bool tunnel_ = false;
  bool passed_ = false;
  net::Watchdog watchdog_;
};

}  // namespace sluice::proxy
