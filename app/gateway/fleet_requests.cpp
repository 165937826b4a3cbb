// The fleet as the proxy's InstanceSet (workers): the router names a revision, its gate (gate.h) hands
// out an instance, a refusal or a move to the revision that replaced it; then the request line.
#include <cmath>
#include <cstdio>

#include "app/gateway/fleet.h"
#include "common/log.h"
#include "proxy/exchange/headers.h"

namespace sluice::app::gateway {

asio::awaitable<std::variant<proxy::InstanceLease, proxy::InstanceRefusal>> Fleet::acquire(
    std::string_view host, std::string_view tag, bool proxied, Clock::time_point deadline, net::WaitAbandon* abandon) {
  // An instance's call through http_proxy (supervisor.cpp) to a host that is no service here: not the
  // default service's business, and not forwarded out (the gateway is no open proxy).
  if (proxied && !router_.names(host))
    co_return proxy::InstanceRefusal{
        502, "'" + host_of(host) + "' is not a service of this gateway: an instance's http_proxy sends plain-http calls "
             "here to reach services by name (http://<service>/); add the host to no_proxy to call it directly"};
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
  const double ms = std::chrono::duration<double, std::milli>(end - r.start).count();
  // Revision and instance are immutable once the hold exists. A request that got no instance (refused,
  // or gone while it waited) names the service its Host is routed to. The list of recent requests takes
  // a lock, for a copy.
  const Revision* routed = nullptr;
  if (!hold) {
    const auto host = req[http::field::host];
    const auto tag = req[proxy::kRouteTagHeader];
    const auto target = req.target();
    const std::string_view h(host.data(), host.size());
    if (!proxy::absolute_form_target(std::string_view(target.data(), target.size())) || router_.names(h))
      routed = router_.route(h, std::string_view(tag.data(), tag.size()));
  }
  {
    RecentRequests::Entry e;
    e.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    e.method = std::string(req.method_string());
    e.path = std::string(req.target());
    e.status = r.status;
    e.duration_ms = ms;
    if (hold) {
      e.service = hold->settings().service;
      e.revision = hold->settings().revision;
      e.instance = hold->instance_id();
      e.cold_start = hold->cold();
    } else if (routed) {
      e.service = routed->config.name;
    }
    recent_.add(std::move(e));
  }
  if (!request_lines_) return;
  char took[32];
  std::snprintf(took, sizeof took, "%.1f ms", ms);
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
