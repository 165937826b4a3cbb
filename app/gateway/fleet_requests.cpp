// The fleet as the proxy's InstanceSet (workers): the router names a revision, its gate (gate.h) hands
// out an instance, a refusal or a move to the revision that replaced it; then the request line.
#include <cmath>
#include <cstdio>

#include "app/gateway/fleet.h"
#include "common/log.h"
#include "proxy/forward/headers.h"

namespace sluice::app::gateway {

asio::awaitable<std::variant<proxy::InstanceLease, proxy::InstanceRefusal>> Fleet::acquire(
    std::string_view host, std::string_view tag, Clock::time_point deadline, net::WaitAbandon* abandon) {
  Revision* s = router_.route(host, tag);
  if (!s) co_return proxy::InstanceRefusal{404, "no service is routed for Host '" + std::string(host) + "'"};
  auto ex = co_await asio::this_coro::executor;
  const auto arrived = clock_now();
  // A revision replaced while this request waited hands it on to the new one: wait there.
  Gate* gate = s->gate.get();
  for (int moves = 0;; ++moves) {
    auto attempt = gate->acquire(ex, arrived, deadline, moves == 0, abandon);  // named: see STYLE.md on co_await
    auto got = co_await std::move(attempt);
    if (auto* moved = std::get_if<Gate::Moved>(&got)) {
      gate = moved->to;
      continue;
    }
    if (auto* refusal = std::get_if<proxy::InstanceRefusal>(&got)) co_return *refusal;
    co_return std::get<proxy::InstanceLease>(got);
  }
}

void Fleet::exchange_ended(const http::request_header<>& req, const proxy::ExchangeRecord& r,
                           const proxy::InstanceLease* lease, Clock::time_point end) {
  auto* hold = lease ? static_cast<Gate::Hold*>(lease->hold.get()) : nullptr;
  if (hold) hold->ended(r.status);
  if (!request_lines_) return;
  const double ms = std::chrono::duration<double, std::milli>(end - r.start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f ms", ms);
  // Revision and instance are immutable once the hold exists; nothing here takes a lock. A request that
  // got no instance (refused, or gone while it waited) names the service its Host is routed to.
  const Revision* routed = nullptr;
  if (!hold) {
    auto host = req[http::field::host];
    auto tag = req[proxy::kRouteTagHeader];
    routed = router_.route(std::string_view(host.data(), host.size()), std::string_view(tag.data(), tag.size()));
  }
  if (plain_output_) {  // a terminal: one short line a request, as local dev servers print them
    std::string text = std::string(req.method_string()) + " " + std::string(req.target()) + " " +
                       std::to_string(r.status) + " " + took;
    if (hold) text += "  " + hold->settings().revision + " " + hold->instance_id() + (hold->cold() ? " (cold start)" : "");
    else if (routed) text += "  " + routed->config.name;
    log::info(text);
    return;
  }
  auto line = log::info("request");
  line.kv("event", "request").kv("method", std::string_view(req.method_string()))
      .kv("path", std::string_view(req.target())).kv("status", r.status)
      .kv("duration_ms", std::round(ms * 10) / 10);
  if (hold)
    line.kv("service", hold->settings().service).kv("revision", hold->settings().revision)
        .kv("instance", hold->instance_id()).kv("cold_start", hold->cold());
  else if (routed)
    line.kv("service", routed->config.name);
}

void Fleet::on_connection() {
  // The request's Host is not known yet: warm the default service, whose requests these mostly are.
  if (auto* s = router_.default_primary()) s->gate->prewarm(clock_now() + std::chrono::seconds(1));
}

}  // namespace sluice::app::gateway
