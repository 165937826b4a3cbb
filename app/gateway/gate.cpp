// A revision's gate; see gate.h.
#include "app/gateway/gate.h"

#include <algorithm>

#include "common/log.h"
#include "proxy/forward/failure.h"

namespace sluice::app::gateway {

std::string_view to_string(InstanceState s) {
  switch (s) {
    case InstanceState::starting: return "starting";
    case InstanceState::ready: return "ready";
    case InstanceState::draining: return "draining";
    case InstanceState::stopped: return "stopped";
  }
  return "?";
}

Gate::Gate(GateSettings settings, Supervision& supervision, std::function<Clock::time_point()> clock)
    : settings_(std::move(settings)),
      supervision_(supervision),
      clock_(std::move(clock)),
      stats_(now()),
      throttling_(settings_.throttling) {}

std::size_t Gate::active() const {
  return static_cast<std::size_t>(std::count_if(instances_.begin(), instances_.end(), [](const auto& i) {
    return i->state == InstanceState::starting || i->state == InstanceState::ready;
  }));
}

bool Gate::none_ready() const {
  return std::none_of(instances_.begin(), instances_.end(),
                      [](const auto& i) { return i->state == InstanceState::ready; });
}

std::shared_ptr<Instance> Gate::pick() const {
  const auto cc = settings_.container_concurrency;
  std::shared_ptr<Instance> best;
  for (const auto& i : instances_) {
    if (i->state != InstanceState::ready || (cc != 0 && i->in_flight >= cc)) continue;
    // Least loaded first; among equals a thawed one (no thaw to pay), then the oldest.
    if (!best || i->in_flight < best->in_flight || (i->in_flight == best->in_flight && best->frozen && !i->frozen))
      best = i;
  }
  return best;
}

void Gate::grant(const std::shared_ptr<Instance>& inst) {
  ++inst->in_flight;
  ++inst->requests;
  ++in_flight_;
  if (inst->frozen) {
    inst->frozen = false;
    supervision_.thaw(inst);
  }
  inst->warm_until = {};
}

void Gate::dispatch() {
  while (!waiters_.empty()) {
    auto inst = pick();
    if (!inst) return;
    grant(inst);
    waiters_.hand_front(inst);
  }
}

proxy::InstanceRefusal Gate::refuse(proxy::InstanceRefusal r) {
  ++refused_;
  ++ended_by_status_[static_cast<int>(r.status)];
  stats_.request_out(now(), false);
  return r;
}

asio::awaitable<Gate::Outcome> Gate::acquire(asio::any_io_executor ex, Clock::time_point arrived,
                                             Clock::time_point deadline, bool arrival, net::WaitAbandon* abandon) {
  bool cold = false;  // it waits while no instance is ready
  auto lease_of = [&](std::shared_ptr<Instance> inst) {
    return proxy::InstanceLease{tcp::endpoint(inst->address, inst->port),
                               std::make_shared<Hold>(*this, inst, arrived, cold), settings_.h2c,
                               settings_.request_timeout.value_or(std::chrono::milliseconds{0})};
  };
  const auto& name = settings_.service;
  net::WaitQueue<Handed>::Ticket ticket;
  {
    std::unique_lock lock(mu_);
    if (admits_ == Admits::moved) co_return Moved{successor_};
    if (admits_ == Admits::closed) co_return proxy::InstanceRefusal{503, closed_reason_};
    stats_.request_in(arrived, false);
    if (arrival) ++requests_total_;
    if (waiters_.empty()) {
      if (auto inst = pick()) {
        grant(inst);
        lock.unlock();
        co_return lease_of(inst);
      }
    }
    if (!failed_reason_.empty() && arrived < retry_at_ && active() == 0) {
      // Retry-After: when the next start attempt is due (at least 1 s), as Cloud Run's 503s carry.
      auto wait = std::chrono::ceil<std::chrono::seconds>(retry_at_ - arrived).count();
      co_return refuse({503, "service " + name + " failed to start: " + failed_reason_,
                        static_cast<unsigned>(std::max<long long>(1, wait))});
    }
    // Knative's activator pokes the autoscaler; here the supervisor is told at once.
    if (active() == 0) supervision_.wanted();
    if (waiters_.size() >= settings_.buffer_size)
      co_return refuse({503, "service " + name + ": cold-start buffer full (" + std::to_string(waiters_.size()) +
                                 " requests waiting)"});
    cold = none_ready();
    if (cold && !cold_start_since_) {
      cold_start_since_ = arrived;
      cold_start_buffered_ = 0;
    }
    if (cold) ++cold_start_buffered_;
    auto wait_until = std::min(deadline, arrived + settings_.buffer_timeout);
    if (settings_.request_timeout) wait_until = std::min(wait_until, arrived + *settings_.request_timeout);
    ticket = waiters_.join(ex, wait_until);
  }
  co_await ticket.wait(abandon);
  std::unique_lock lock(mu_);
  if (auto& handed = ticket.outcome()) {
    if (auto* refusal = std::get_if<proxy::InstanceRefusal>(&*handed)) co_return refuse(*refusal);
    if (auto* moved = std::get_if<Moved>(&*handed)) {
      stats_.request_out(now(), false);  // it counts at the next revision now
      co_return *moved;
    }
    auto inst = std::get<std::shared_ptr<Instance>>(*handed);
    lock.unlock();
    // Thawed by grant() if it was frozen (asked by the thread that granted it).
    co_return lease_of(inst);
  }
  waiters_.leave(ticket);
  if (abandon && abandon->abandoned()) co_return abandoned(arrived);
  auto waited = std::to_string(static_cast<long long>(ms_between(arrived, now()))) + " ms";
  if (!none_ready()) co_return refuse({504, "service " + name + ": no instance was free within " + waited});
  co_return refuse({504, "service " + name + ": no instance became ready within " + waited +
                             (start_waits_.empty() ? "" : " (" + start_waits_ + ")")});
}

proxy::InstanceRefusal Gate::abandoned(Clock::time_point arrived) {
  const auto t = now();
  ++client_gone_;
  ++ended_by_status_[proxy::kClientClosedRequest];
  // Taken back from the autoscaler's view when no stat has read it yet: the KPA then never sees demand
  // from a request nobody waits for any more.
  const bool unseen = stats_.withdraw(arrived, t, false);
  log::info("buffered request left: its client went away").kv("event", "request.abandoned")
      .kv("service", settings_.service).kv("revision", settings_.revision).kv("status", proxy::kClientClosedRequest)
      .kv("waited_ms", ms_between(arrived, t)).kv("autoscaler_saw_it", !unseen);
  if (waiters_.empty() && in_flight_ == 0 && none_ready()) supervision_.unwanted();
  return {static_cast<unsigned>(proxy::kClientClosedRequest), "client closed request"};
}

void Gate::release(const std::shared_ptr<Instance>& inst, Clock::time_point arrived, int status) {
  const auto t = now();
  std::lock_guard lock(mu_);
  stats_.request_out(t, false);
  if (status != 0) ++ended_by_status_[status];  // 0: the proxy never said how it ended
  if (status == static_cast<int>(proxy::kClientClosedRequest)) ++client_gone_;  // left while at the instance
  // Arrival to the end of the exchange, any wait in the buffer included: the dashboard's percentiles.
  if (latencies_ms_.size() < kLatenciesKept) latencies_ms_.push_back(ms_between(arrived, t));
  else latencies_ms_[latency_next_] = ms_between(arrived, t);
  latency_next_ = (latency_next_ + 1) % kLatenciesKept;
  --inst->in_flight;
  --in_flight_;
  if (inst->state == InstanceState::ready && !waiters_.empty()) {
    dispatch();
  } else if (inst->in_flight == 0) {
    if (inst->state == InstanceState::draining) {
      inst->state = InstanceState::stopped;
      supervision_.stopped(inst);
    } else if (inst->state == InstanceState::ready && throttling_) {
      // With a delay, the sweep of warm instances (Supervisor::refreeze) freezes it once warm_until passes.
      if (settings_.freeze_delay > Clock::duration::zero()) inst->warm_until = t + settings_.freeze_delay;
      else supervision_.idle(inst);
    }
  }
}

void Gate::prewarm(Clock::time_point until) {
  if (!throttling_) return;  // the common case, without the lock
  std::lock_guard lock(mu_);
  auto inst = pick();
  if (!inst || !inst->frozen || inst->in_flight != 0) return;
  inst->frozen = false;
  inst->warm_until = until;
  supervision_.thaw(inst);
}

void Gate::clear_waiters() {
  std::lock_guard lock(mu_);
  waiters_.clear();
}

void Gate::add(std::shared_ptr<Instance> instance) {
  std::lock_guard lock(mu_);
  instances_.push_back(std::move(instance));
}

void Gate::remove(const std::shared_ptr<Instance>& instance) {
  std::lock_guard lock(mu_);
  std::erase(instances_, instance);
}

InstanceState Gate::state(const Instance& instance) const {
  std::lock_guard lock(mu_);
  return instance.state;
}

void Gate::set_address(Instance& instance, const asio::ip::address_v4& address) {
  std::lock_guard lock(mu_);
  instance.address = address;
}

bool Gate::started(Instance& instance, std::uint16_t port, int pid) {
  std::lock_guard lock(mu_);
  instance.port = port;
  instance.pid = pid;
  return instance.state != InstanceState::stopped;
}

void Gate::note_ready(Instance& inst, Clock::time_point t) {
  inst.state = InstanceState::ready;
  inst.ready_at = t;
  failed_reason_.clear();
  start_waits_.clear();
  if (!cold_start_since_) return;
  last_cold_start_ms_ = ms_between(*cold_start_since_, t);
  ++cold_starts_;
  cold_start_log_.emplace_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count(),
                               last_cold_start_ms_);
  if (cold_start_log_.size() > kColdStartsKept) cold_start_log_.pop_front();
  log::info("cold start " + settings_.service + ": 0→1 in " + std::to_string(static_cast<long long>(last_cold_start_ms_)) +
            " ms (" + std::to_string(cold_start_buffered_) + (cold_start_buffered_ == 1 ? " request" : " requests") +
            " buffered)")
      .kv("event", "cold_start").kv("service", settings_.service).kv("ms", last_cold_start_ms_)
      .kv("buffered", static_cast<std::uint64_t>(cold_start_buffered_));
  cold_start_since_.reset();
}

Gate::Readied Gate::became_ready(const std::shared_ptr<Instance>& instance, Clock::time_point t, bool stop_if_idle) {
  std::lock_guard lock(mu_);
  if (instance->state != InstanceState::starting) return Readied::no;
  note_ready(*instance, t);
  dispatch();
  if (instance->in_flight != 0) return Readied::busy;
  if (!stop_if_idle) {
    if (throttling_ && settings_.freeze_delay > Clock::duration::zero()) instance->warm_until = t + settings_.freeze_delay;
    return Readied::idle;
  }
  instance->state = InstanceState::stopped;
  return Readied::stopped;
}

bool Gate::start_failed(Instance& instance, const std::string& reason, Clock::time_point retry_at) {
  std::lock_guard lock(mu_);
  if (instance.state == InstanceState::stopped) return false;
  instance.state = InstanceState::stopped;
  failed_reason_ = reason;
  retry_at_ = retry_at;
  if (active() == 0) {
    auto wait = std::chrono::ceil<std::chrono::seconds>(retry_at - now()).count();
    waiters_.hand_all(proxy::InstanceRefusal{503, "service " + settings_.service + " failed to start: " + reason,
                                             static_cast<unsigned>(std::max<long long>(1, wait))});
    cold_start_since_.reset();
  }
  return true;
}

Gate::Drained Gate::drain_locked(Instance& instance) {
  if (instance.state != InstanceState::ready && instance.state != InstanceState::starting) return Drained::no;
  if (instance.in_flight != 0) {
    instance.state = InstanceState::draining;
    return Drained::draining;
  }
  instance.state = InstanceState::stopped;
  return Drained::stopped;
}

Gate::Drained Gate::drain(Instance& instance) {
  std::lock_guard lock(mu_);
  return drain_locked(instance);
}

std::vector<std::pair<std::shared_ptr<Instance>, Gate::Drained>> Gate::drain_idlest(std::size_t n) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Instance>> ready;
  for (const auto& i : instances_)
    if (i->state == InstanceState::ready) ready.push_back(i);
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) {
    if (a->in_flight != b->in_flight) return a->in_flight < b->in_flight;
    return a->ready_at > b->ready_at;  // the newest goes first: the oldest has the warmest caches
  });
  std::vector<std::pair<std::shared_ptr<Instance>, Drained>> out;
  for (std::size_t k = 0; k < ready.size() && k < n; ++k) out.emplace_back(ready[k], drain_locked(*ready[k]));
  return out;
}

bool Gate::stop(Instance& instance) {
  std::lock_guard lock(mu_);
  if (instance.state == InstanceState::stopped) return false;
  instance.state = InstanceState::stopped;
  return true;
}

std::vector<std::shared_ptr<Instance>> Gate::call_off_starts() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Instance>> out;
  if (!waiters_.empty() || in_flight_ != 0) return out;
  for (const auto& i : instances_)
    if (i->state == InstanceState::starting && !i->validation) {
      i->state = InstanceState::stopped;
      out.push_back(i);
    }
  if (!out.empty()) cold_start_since_.reset();
  return out;
}

bool Gate::freeze_if_idle(Instance& instance, Clock::time_point t, const std::function<void()>& freeze) {
  std::lock_guard lock(mu_);
  if (!throttling_ || instance.in_flight != 0 || instance.frozen || instance.state != InstanceState::ready) return false;
  if (instance.warm_until > t) return false;
  instance.frozen = true;
  freeze();
  return true;
}

void Gate::freeze_failed(Instance& instance) {
  std::lock_guard lock(mu_);
  throttling_ = false;  // once is enough to know: the revision runs unthrottled from now on
  instance.frozen = false;
}

std::vector<std::shared_ptr<Instance>> Gate::warm_expired(Clock::time_point t) {
  std::vector<std::shared_ptr<Instance>> out;
  if (!throttling_) return out;
  std::lock_guard lock(mu_);
  for (const auto& i : instances_)
    if (i->state == InstanceState::ready && !i->frozen && i->in_flight == 0 && i->warm_until != Clock::time_point{} &&
        i->warm_until <= t) {
      i->warm_until = {};
      out.push_back(i);
    }
  return out;
}

void Gate::move_to(Gate& successor) {
  std::lock_guard lock(mu_);
  admits_ = Admits::moved;
  successor_ = &successor;
  waiters_.hand_all(Moved{&successor});  // they wait at the new revision instead; none is refused
}

void Gate::close(std::string reason) {
  std::lock_guard lock(mu_);
  admits_ = Admits::closed;
  closed_reason_ = std::move(reason);
  waiters_.hand_all(proxy::InstanceRefusal{503, closed_reason_});
}

void Gate::note_start_waits(std::string what) {
  std::lock_guard lock(mu_);
  start_waits_ = std::move(what);
}

void Gate::reopen() {
  std::lock_guard lock(mu_);
  admits_ = Admits::requests;
  successor_ = nullptr;
  closed_reason_.clear();
}

GateView Gate::view(bool history) const {
  std::lock_guard lock(mu_);
  GateView v;
  v.active = active();
  for (const auto& i : instances_) {
    v.ready += i->state == InstanceState::ready;
    v.instances.push_back(*i);
  }
  v.in_flight = in_flight_;
  v.queued = waiters_.size();
  v.throttling = throttling_;
  v.failed_reason = failed_reason_;
  v.retry_at = retry_at_;
  v.requests_total = requests_total_;
  v.refused = refused_;
  v.client_gone = client_gone_;
  v.cold_starts = cold_starts_;
  v.ended_by_status = ended_by_status_;
  v.last_cold_start_ms = last_cold_start_ms_;
  if (history) {
    v.cold_start_log = cold_start_log_;
    v.latencies_ms = latencies_ms_;
  }
  return v;
}

std::vector<std::shared_ptr<Instance>> Gate::instances() const {
  std::lock_guard lock(mu_);
  return instances_;
}

}  // namespace sluice::app::gateway
