// The request path: the router names a revision; a ready instance with a free slot takes the request at
// once, else it waits in the revision's WaitQueue (the cold-start buffer) on its own worker's executor
// until an instance is handed to it, a refusal is, or its deadline passes. Only the revision's own mutex
// is taken, for a few lines, and the runtime is never called here: a start is posted to the spawner, a
// thaw to the throttler. See fleet.h.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/gateway/fleet.h"
#include "common/log.h"
#include "proxy/forward/failure.h"

namespace sluice::app::gateway {

class Fleet::Hold {
 public:
  // `cold`: the request waited for an instance to start (none was ready when it came).
  Hold(Fleet& f, Revision& s, std::shared_ptr<Instance> i, Clock::time_point arrived, bool cold)
      : fleet_(f), revision_(s), instance_(std::move(i)), arrived_(arrived), cold_(cold) {}
  ~Hold() { fleet_.release(revision_, instance_, arrived_, status_); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

  // How the exchange ended, counted when the hold is let go (under the revision's lock it takes then).
  void ended(int status) { status_ = status; }
  const Revision& revision() const { return revision_; }
  const Instance& instance() const { return *instance_; }
  bool cold() const { return cold_; }

 private:
  Fleet& fleet_;
  Revision& revision_;
  std::shared_ptr<Instance> instance_;
  Clock::time_point arrived_;
  bool cold_;
  int status_ = 0;
};

void Fleet::grant(Revision& s, Instance& inst) {
  ++inst.in_flight;
  ++inst.requests;
  ++s.in_flight;
  if (inst.frozen) {
    inst.frozen = false;
    post_thaw(inst.id);
  }
  inst.prewarm_until = {};
}

void Fleet::dispatch(Revision& s) {
  while (!s.waiters.empty()) {
    auto inst = s.pick();
    if (!inst) return;
    grant(s, *inst);
    s.waiters.hand_front(inst);
  }
}

asio::awaitable<std::variant<proxy::InstanceLease, proxy::InstanceRefusal>> Fleet::acquire(
    std::string_view host, std::string_view tag, Clock::time_point deadline, net::WaitAbandon* abandon) {
  Revision* s = router_.route(host, tag);
  if (!s) co_return proxy::InstanceRefusal{404, "no service is routed for Host '" + std::string(host) + "'"};
  auto ex = co_await asio::this_coro::executor;
  auto now = clock_now();
  // A revision replaced while this request waited hands it on to the new one: wait there.
  for (int moves = 0;; ++moves) {
    auto attempt = acquire_at(*s, ex, now, deadline, moves == 0, abandon);  // named: see STYLE.md on co_await
    auto got = co_await std::move(attempt);
    if (auto* moved = std::get_if<Moved>(&got)) {
      s = moved->to;
      continue;
    }
    if (auto* refusal = std::get_if<proxy::InstanceRefusal>(&got)) co_return *refusal;
    co_return std::get<proxy::InstanceLease>(got);
  }
}

// The request counts in the revision's RequestStats from here (waiting included, as the KPA wants it)
// until its lease is released, it is refused, or it moves on to another revision.
asio::awaitable<std::variant<proxy::InstanceLease, proxy::InstanceRefusal, Moved>> Fleet::acquire_at(
    Revision& service, const asio::any_io_executor& ex, Clock::time_point now, Clock::time_point deadline,
    bool arrival, net::WaitAbandon* abandon) {
  Revision* s = &service;
  bool cold = false;  // it waits while no instance is ready
  auto lease_of = [&](std::shared_ptr<Instance> inst) {
    return proxy::InstanceLease{tcp::endpoint(inst->address, inst->port),
                               std::make_shared<Hold>(*this, *s, inst, now, cold), s->h2c,
                               s->config.request_timeout.value_or(Millis{0})};
  };
  auto refuse = [&](proxy::InstanceRefusal r) {  // under s->mu
    ++s->refused;
    ++s->ended_by_status[static_cast<int>(r.status)];
    s->stats.request_out(clock_now(), false);
    return r;
  };
  net::WaitQueue<Handed>::Ticket ticket;
  {
    std::unique_lock lock(s->mu);
    if (s->phase == Phase::retired && s->successor) co_return Moved{s->successor};
    if (s->phase != Phase::serving)
      co_return proxy::InstanceRefusal{503, "service " + s->config.name + " was removed from the config"};
    s->stats.request_in(now, false);
    if (arrival) ++s->requests_total;
    if (s->waiters.empty()) {
      if (auto inst = s->pick()) {
        grant(*s, *inst);
        lock.unlock();
        co_return lease_of(inst);
      }
    }
    if (!s->failed_reason.empty() && now < s->retry_at && s->active() == 0) {
      // Retry-After: when the next start attempt is due (at least 1 s), as Cloud Run's 503s carry.
      auto wait = std::chrono::ceil<std::chrono::seconds>(s->retry_at - now).count();
      co_return refuse({503, "service " + s->config.name + " failed to start: " + s->failed_reason,
                        static_cast<unsigned>(std::max<long long>(1, wait))});
    }
    // Knative's activator pokes the autoscaler; here the first instance starts at once (posted).
    if (s->active() == 0) start_instance(*s, false);
    if (s->waiters.size() >= s->config.buffer_size)
      co_return refuse({503, "service " + s->config.name + ": cold-start buffer full (" +
                                 std::to_string(s->waiters.size()) + " requests waiting)"});
    bool none_ready = s->none_ready();
    if (none_ready && !s->cold_start_since) {
      s->cold_start_since = now;
      s->cold_start_buffered = 0;
    }
    if (none_ready) ++s->cold_start_buffered;
    cold = none_ready;
    auto wait_until = std::min(deadline, now + s->config.buffer_timeout);
    if (s->config.request_timeout) wait_until = std::min(wait_until, now + *s->config.request_timeout);
    ticket = s->waiters.join(ex, wait_until);
  }
  co_await ticket.wait(abandon);
  std::unique_lock lock(s->mu);
  if (auto& handed = ticket.outcome()) {
    if (auto* refusal = std::get_if<proxy::InstanceRefusal>(&*handed)) co_return refuse(*refusal);
    if (std::holds_alternative<Moved>(*handed)) {
      s->stats.request_out(clock_now(), false);  // it counts at the next revision now
      co_return std::get<Moved>(*handed);
    }
    auto inst = std::get<std::shared_ptr<Instance>>(*handed);
    lock.unlock();
    // Thawed by grant() if it was frozen (posted by the thread that granted it).
    co_return lease_of(inst);
  }
  s->waiters.leave(ticket);
  if (abandon && abandon->abandoned()) co_return abandoned(*s, now);
  auto waited = std::to_string(static_cast<long long>(ms_between(now, clock_now()))) + " ms";
  co_return refuse({504, s->none_ready() ? "service " + s->config.name + ": no instance became ready within " + waited
                                         : "service " + s->config.name + ": no instance was free within " + waited});
}

proxy::InstanceRefusal Fleet::abandoned(Revision& s, Clock::time_point arrived) {
  const auto now = clock_now();
  ++s.client_gone;
  ++s.ended_by_status[proxy::kClientClosedRequest];
  // Taken back from the autoscaler's view when no stat has read it yet: the KPA then never sees demand
  // from a request nobody waits for any more.
  const bool unseen = s.stats.withdraw(arrived, now, false);
  log::info("buffered request left: its client went away").kv("event", "request.abandoned")
      .kv("service", s.config.name).kv("revision", s.revision).kv("status", proxy::kClientClosedRequest)
      .kv("waited_ms", ms_between(arrived, now)).kv("autoscaler_saw_it", !unseen);
  if (s.waiters.empty() && s.in_flight == 0 && s.none_ready()) {
    Revision* sp = &s;
    asio::post(control_, [this, sp] { call_off_starts(*sp); });
  }
  return {static_cast<unsigned>(proxy::kClientClosedRequest), "client closed request"};
}

void Fleet::release(Revision& s, const std::shared_ptr<Instance>& inst, Clock::time_point arrived, int status) {
  const auto now = clock_now();
  std::lock_guard lock(s.mu);
  s.stats.request_out(now, false);
  if (status != 0) ++s.ended_by_status[status];  // 0: the proxy never said how it ended
  // Arrival to the end of the exchange, any wait in the buffer included: the dashboard's percentiles.
  if (s.latencies_ms.size() < kLatenciesKept) s.latencies_ms.push_back(ms_between(arrived, now));
  else s.latencies_ms[s.latency_next] = ms_between(arrived, now);
  s.latency_next = (s.latency_next + 1) % kLatenciesKept;
  --inst->in_flight;
  --s.in_flight;
  if (inst->state == InstanceState::ready && !s.waiters.empty()) {
    dispatch(s);
  } else if (inst->in_flight == 0) {
    if (inst->state == InstanceState::draining) stop_instance(s, inst);
    else if (inst->state == InstanceState::ready && s.throttling) post_freeze(s, inst);
  }
}

void Fleet::exchange_ended(const http::request_header<>& req, const proxy::ExchangeRecord& r,
                           const proxy::InstanceLease* lease, Clock::time_point end) {
  auto* hold = lease ? static_cast<Hold*>(lease->hold.get()) : nullptr;
  if (hold) hold->ended(r.status);
  if (!request_lines_) return;
  const double ms = std::chrono::duration<double, std::milli>(end - r.start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f ms", ms);
  // Revision and instance are immutable once the hold exists; nothing here takes a lock.
  if (plain_output_) {  // a terminal: one short line a request, as local dev servers print them
    std::string text = std::string(req.method_string()) + " " + std::string(req.target()) + " " +
                       std::to_string(r.status) + " " + took;
    if (hold) text += "  " + hold->revision().revision + " " + hold->instance().id + (hold->cold() ? " (cold start)" : "");
    log::info(text);
    return;
  }
  auto line = log::info("request");
  line.kv("event", "request").kv("method", std::string_view(req.method_string()))
      .kv("path", std::string_view(req.target())).kv("status", r.status)
      .kv("duration_ms", std::round(ms * 10) / 10);
  if (hold)
    line.kv("service", hold->revision().config.name).kv("revision", hold->revision().revision)
        .kv("instance", hold->instance().id).kv("cold_start", hold->cold());
}

void Fleet::on_connection() {
  // The request's Host is not known yet: warm the default service, whose requests these mostly are.
  auto* s = router_.default_primary();
  if (!s || !s->throttling) return;
  std::lock_guard lock(s->mu);
  auto inst = s->pick();
  if (!inst || !inst->frozen || inst->in_flight != 0) return;
  inst->frozen = false;
  inst->prewarm_until = clock_now() + std::chrono::seconds(1);
  post_thaw(inst->id);
}

}  // namespace sluice::app::gateway
