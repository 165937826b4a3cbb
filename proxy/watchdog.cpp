// Deadline enforcement with one lazily re-armed timer; see watchdog.h.
#include "proxy/watchdog.h"

namespace sluice::proxy {

Watchdog::Watchdog(const asio::any_io_executor& ex, Target& target)
    : s_(std::make_shared<State>(ex)) {
  s_->target = &target;
}

Watchdog::~Watchdog() {
  s_->target = nullptr;
  s_->timer.cancel();
}

void Watchdog::rearm() {
  auto d = s_->target->next_deadline();
  if (d < s_->armed) arm(s_, d);
}

void Watchdog::arm(const std::shared_ptr<State>& s, Clock::time_point when) {
  s->armed = when;
  if (when == Clock::time_point::max()) return;
  s->timer.expires_at(when);  // cancels the previous wait; its handler sees a stale generation
  auto gen = ++s->generation;
  s->timer.async_wait([s, gen](error_code) {
    if (gen != s->generation || !s->target) return;
    s->armed = Clock::time_point::max();
    auto d = s->target->next_deadline();
    if (d <= Clock::now()) {
      s->target->on_deadline();
      if (!s->target) return;
      d = s->target->next_deadline();
    }
    arm(s, d);
  });
}

}  // namespace sluice::proxy
