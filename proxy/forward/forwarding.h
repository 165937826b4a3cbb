// The forwarder's inside (see forwarder.h), shared by its two files: forwarder.cpp has the policy (admission,
// upstream choice, retry, failures), forwarder_relay.cpp moves heads and bodies between the two codecs.
#pragma once

#include <optional>

#include "proxy/forward/admission.h"
#include "proxy/forward/context.h"
#include "proxy/forward/deadline.h"
#include "proxy/forward/failure.h"
#include "proxy/forward/forwarder.h"
#include "proxy/io/splice.h"

namespace sluice::proxy::forwarding {

// The client closed its end, or left in the middle of its request's body.
inline bool client_went_away(error_code ec) { return peer_closed(ec) || ec == http::error::partial_message; }

// One exchange between admission and the end of its response.
class Forwarding final : private ClientGone, private ExchangeDeadline::Owner {
 public:
  Forwarding(ForwardContext& worker, ServerExchange& down)
      : worker_(worker),
        down_(down),
        record_(down.record),
        req_(down.request()),
        deadline_(worker.watchdogs, worker.config.timeouts, down.record.start, *this) {
    down_.watcher = this;
  }
  ~Forwarding() { down_.watcher = nullptr; }
  Forwarding(const Forwarding&) = delete;
  Forwarding& operator=(const Forwarding&) = delete;

  asio::awaitable<void> run();
  // After run(), for an exchange the request metrics take (CountedExchange::measured()): the app's side,
  // once the app was asked. kn_serving_invocation_duration (and the legacy revision_app_*) with the status
  // the exchange ended with: queue-proxy's app metrics sit after its breaker, around its proxy, so a 502
  // from a refused connection counts and the queue wait does not. otelhttp's http_client_* as its transport
  // sees the exchange: until the response head (or the error), with the app's own status.
  void count_app_exchange(Clock::time_point end, const CountedExchange& counted) const;
  // After run(): the gateway's InstanceSet hears how the exchange ended, with the lease it had.
  void report_to_instances(Clock::time_point end) const {
    if (auto* set = worker_.shared.instances.get(); set && asked_for_instance_)
      set->exchange_ended(req_, record_, lease_ ? &*lease_ : nullptr, end);
  }

 private:
  void client_gone() override {
    if (response_ == Response::complete) return;  // it left after the whole response: nothing was lost
    gone_ = true;
    waiting_.abandon();  // waiting for a breaker slot or an instance: it leaves the queue now
    if (up_) up_->cancel();
    down_.cancel_io();
  }
  void deadline_passed() override {
    if (up_) up_->cancel();
    down_.cancel_io();
  }

  asio::awaitable<void> answer(const LocalAnswer& a) {
    record_.status = static_cast<int>(a.status);
    record_.response_bytes = a.body.size() + (a.exact_body ? 0 : 1);
    co_await down_.send_local(a);
  }
  // The exchange failed before its response started: the table says what the client gets.
  asio::awaitable<void> fail(Failure f, error_code ec);
  // Why the exchange failed before the response, from what the sides saw.
  Failure classify(Failure upstream_failure) const;

  asio::awaitable<error_code> receive_head();
  // The splice (splice.h) for a body of which `in` is the rest, when both codecs and the configuration
  // allow one (`out` is where it goes); null: copy it through the codecs.
  BodySplice* splice_for(std::optional<BodySplice>& splice, const RawBody& in, const tcp::socket* out);
  asio::awaitable<error_code> pump_request();
  asio::awaitable<void> respond();
  asio::awaitable<void> exchange_streaming();
  void note_request_bytes(std::size_t n) { record_.request_bytes += n; }

  ForwardContext& worker_;
  ServerExchange& down_;
  ExchangeRecord& record_;
  http::request_header<>& req_;
  ExchangeDeadline deadline_;
  net::WaitAbandon waiting_;  // ends a wait for admission when the client goes
  std::optional<InstanceLease> lease_;  // the gateway's instance, held until the exchange is gone
  bool asked_for_instance_ = false;
  std::unique_ptr<ClientExchange> up_;
  std::optional<BodySplice> request_splice_, response_splice_;
  http::response_header<>* head_ = nullptr;
  Clock::time_point upstream_start_;
  int head_status_ = 0;          // the app's final response head's status (0: none came; head_ may be gone
                                 // with up_ by the time the exchange is counted)
  Clock::time_point head_at_{};  // when it came (with request metrics on)
  std::uint64_t request_bytes_at_head_ = 0;  // the body's bytes the app had been sent by then
  std::size_t in_hand_bytes_ = 0;            // a whole body sent with the head (noted once the head came)
  Failure app_failure_ = Failure::upstream;  // why no head came, when none did
  bool upgrade_ = false;
  bool gone_ = false;
  // How far the response to the client got: nothing sent yet, its head sent, or all of it (an upgrade
  // that became a tunnel never completes: the connection ends with it).
  enum class Response { not_started, started, complete };
  Response response_ = Response::not_started;
  bool request_complete_ = false;
  bool upstream_failed_ = false;  // the app broke off (as opposed to the client or a deadline)
  error_code request_error_;      // reading the client's body failed
};

}  // namespace sluice::proxy::forwarding
