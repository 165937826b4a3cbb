// The fleet's frame: construction and shutdown; see fleet.h.
#include "app/gateway/fleet.h"

#include <algorithm>
#include <future>

#include "common/log.h"

namespace sluice::app::gateway {

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::validating: return "validating";
    case Phase::serving: return "serving";
    case Phase::retired: return "retired";
    case Phase::failed: return "failed";
  }
  return "?";
}

Fleet::Fleet(const GatewayConfig& config, runtime::RuntimeService& runtime, asio::io_context& control,
             std::function<Clock::time_point()> clock)
    : config_(config),
      clock_(clock),
      control_(control),
      scaling_timer_(control),
      housekeeping_timer_(control),
      supervisor_(config, runtime, control, *this, std::move(clock)) {
  current_ = std::make_shared<GatewayConfig>(config);
  for (const auto& sc : config.services) {
    for (auto earlier : sc.earlier) {  // a Knative file's older revisions of the Service
      earlier.is_default = sc.is_default;
      earlier.hosts = sc.hosts;
      add_revision(earlier, config, Phase::serving, "").earlier_document = true;
    }
    assign_traffic(sc.name, sc.traffic, add_revision(sc, config, Phase::serving, ""));
  }
}

Fleet::~Fleet() {
  supervisor_.stopping();
  builds_running_.wait_all();
}

template <class Fn>
void Fleet::for_each_revision(Fn&& fn) const {
  std::lock_guard lock(list_mu_);
  for (const auto& s : services_) fn(*s);
}

void Fleet::drop_waiters() {
  for_each_revision([](Revision& s) { s.gate->clear_waiters(); });
}

void Fleet::stop_all() {
  supervisor_.stopping();
  // On the control thread, which owns the list and the timers and is still running.
  std::promise<void> stopping;
  asio::post(control_, [&] {
    scaling_timer_.cancel();
    housekeeping_timer_.cancel();
    for (auto& s : services_)
      for (auto& i : s->gate->instances()) supervisor_.stop(*s, i);
    stopping.set_value();
  });
  stopping.get_future().wait();
  supervisor_.wait_stopped();
}

}  // namespace sluice::app::gateway
