// The scaling loop, on the control thread: each second every serving revision's RequestStats period
// (time-weighted concurrency, in flight plus waiting, and arrivals) goes to its KPA, as queue-proxy's
// stat reports do in Knative; every 2 s, right after that second's stats (and whenever the KPA says a stat
// changed its mind), the decision is applied by the supervisor (supervisor.h: instances started or
// drained). One ticker, stats first: with two timers in no fixed order a decision could come just before
// the stat that held a cold start's requests, find the KPA's window idle and drain the instance they had
// brought up. Also the freeze of idle instances past their freeze delay or a pre-warm. See fleet.h.
#include <algorithm>

#include "app/gateway/fleet.h"
#include "common/log.h"

namespace sluice::app::gateway {

using namespace std::chrono_literals;

// A revision's instances as its RevisionScaler sees them.
class Fleet::Supervised final : public autoscaler::ScaleTarget {
 public:
  Supervised(Fleet& fleet, Revision& revision) : fleet_(fleet), revision_(revision) {}
  std::int32_t ready() const override { return static_cast<std::int32_t>(revision_.gate->view().ready); }
  void scale_to(std::int32_t desired) override { fleet_.supervisor_.scale(revision_, desired); }

 private:
  Fleet& fleet_;
  Revision& revision_;
};

namespace {

// A revision's gate's RequestStats as its RevisionScaler reads them (thread-safe on their own).
class GateStats final : public autoscaler::StatsSource {
 public:
  explicit GateStats(metrics::RequestStats& stats) : stats_(stats) {}
  metrics::PeriodReport report(autoscaler::TimePoint now) override { return stats_.report(now); }

 private:
  metrics::RequestStats& stats_;
};

}  // namespace

void Fleet::attach_scaler(Revision& s, const autoscaler::AutoscalerConfig& config, std::int32_t scale,
                          Clock::time_point now) {
  s.stats_source = std::make_unique<GateStats>(s.gate->stats());
  s.scale_target = std::make_unique<Supervised>(*this, s);
  s.scaler = std::make_unique<autoscaler::RevisionScaler>(s.config.name, config, scale, now, *s.stats_source, *s.scale_target);
}

void Fleet::start() {
  for (auto& s : services_) {
    if (s->phase != Phase::serving) continue;
    auto want = std::max<std::int32_t>({s->config.scaling.min_scale, s->config.scaling.initial_scale,
                                        s->config.validate ? 1 : 0});
    for (std::int32_t i = 0; i < want; ++i) supervisor_.start(*s, i == 0 && s->config.validate);
    s->supervised.desired = std::max(s->config.scaling.min_scale, s->config.scaling.initial_scale);
    s->scaler->set_desired(s->supervised.desired);
  }
  asio::co_spawn(control_, every(scaling_timer_, 1s, &Fleet::tick), asio::detached);
  asio::co_spawn(control_, every(housekeeping_timer_, kHousekeeping, &Fleet::housekeeping), asio::detached);
}

asio::awaitable<void> Fleet::every(asio::steady_timer& timer, Clock::duration period, void (Fleet::*run)()) {
  while (true) {
    timer.expires_after(period);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || supervisor_.is_stopping()) co_return;
    (this->*run)();
  }
}

void Fleet::tick() {
  stat_tick();
  if (++ticks_ % 2 == 0) scale_tick();
}

void Fleet::stat_tick() {
  const auto now = clock_now();
  for (auto& s : services_)
    if (s->phase == Phase::serving) s->scaler->stat_tick(now);
}

void Fleet::scale_tick() {
  const auto now = clock_now();
  for (auto& s : services_)
    if (s->phase == Phase::serving) s->scaler->decide(now);
}

// Idle instances past their warm_until (a pre-warm no request came to, the freeze delay): frozen.
void Fleet::housekeeping() {
  const auto now = clock_now();
  for (auto& s : services_) supervisor_.refreeze(*s, now);
}

}  // namespace sluice::app::gateway
