// Control plane; see control_plane.h.
#include "proxy/server/control_plane.h"

#include "common/go_mux.h"
#include "common/gzip.h"
#include "common/log.h"

namespace sluice::proxy {
namespace {

// What Prometheus' Go client names its text format with (OpenTelemetry's exporter escapes names so).
constexpr const char* kPrometheusText = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores";

// sluice's own counters of span export, beside the request metrics.
void append_tracing_counters(std::string& body, const telemetry::SpanExporter& e) {
  body += "# HELP sluice_tracing_spans_dropped_total Spans dropped: the export queue was full, or the export failed.\n"
          "# TYPE sluice_tracing_spans_dropped_total counter\n"
          "sluice_tracing_spans_dropped_total{reason=\"export_failed\"} " + std::to_string(e.failed()) + "\n"
          "sluice_tracing_spans_dropped_total{reason=\"queue_full\"} " + std::to_string(e.dropped()) + "\n"
          "# HELP sluice_tracing_spans_exported_total Spans the collector accepted.\n"
          "# TYPE sluice_tracing_spans_exported_total counter\n"
          "sluice_tracing_spans_exported_total " + std::to_string(e.exported()) + "\n";
}

}  // namespace

ControlPlane::ControlPlane(asio::io_context& io, SharedState& shared, ControlConfig config)
    : io_(io), shared_(shared), config_(std::move(config)), started_(Clock::now()),
      report_tick_(io_) {
  // Until the first period closes, the autoscaler reads an all-zero sample of this pod.
  stat_protobuf_ = metrics::encode_stat_protobuf(config_.pod, sample_);
  auto add = [&](const char* name, const std::string& address, std::uint16_t port, auto member) {
    listeners_.push_back(std::make_unique<ControlListener>(
        io_, name, address, port, [this, member](const ControlRequest& r) { return (this->*member)(r); },
        config_.netns));
  };
  add("admin", config_.listen_address, config_.admin_port, &ControlPlane::serve_admin);
  add("metrics", config_.listen_address, config_.metrics_port, &ControlPlane::serve_stats);
  if (config_.user_metrics && shared_.request_metrics) {
    add("user-metrics", config_.user_metrics_address.empty() ? config_.listen_address : config_.user_metrics_address,
        config_.user_metrics_port, &ControlPlane::serve_user_metrics);
  }
}

ControlPlane::~ControlPlane() { shared_.stats.cancel_arrival_wake(); }

void ControlPlane::start() {
  for (auto& l : listeners_) l->start();
  asio::co_spawn(io_, report_loop(), asio::detached);
}

std::vector<ControlPlane::Bound> ControlPlane::listeners() const {
  std::vector<Bound> out;
  for (const auto& l : listeners_) out.push_back({l->name(), l->port()});
  return out;
}

asio::awaitable<void> ControlPlane::report_loop() {
  auto next = Clock::now() + config_.report_period;
  bool idle = true;  // the last period saw no request
  while (true) {
    if (idle) {  // sleep until the period ends or the first request comes, whichever is first
      woken_ = false;
      auto seen = shared_.stats.requests_total();
      shared_.stats.wake_on_next_arrival([this] {
        asio::post(io_, [this] {
          woken_ = true;
          report_tick_.cancel();
        });
      });
      if (shared_.stats.requests_total() != seen || shared_.stats.in_flight() != 0) woken_ = true;  // raced
    }
    if (!woken_) {
      // Idle, the published sample is the all-zero one and stays so until a request comes: no timer at
      // all (an unused sidecar never wakes; a scrape refreshes the uptime itself, see serve_stats).
      parked_ = idle;
      report_tick_.expires_at(parked_ ? Clock::time_point::max() : next);
      auto [ec] = co_await report_tick_.async_wait(use_nothrow);
      parked_ = false;
      if (ec && !woken_) co_return;
    }
    shared_.stats.cancel_arrival_wake();
    auto now = Clock::now();
    if (woken_) next = now;  // traffic after idle: close the period now, count the next from here
    woken_ = false;
    next += config_.report_period;
    publish(now);
    idle = sample_.period.requests == 0 && sample_.period.average_concurrency == 0;
  }
}

void ControlPlane::publish(Clock::time_point now) {
  sample_ = {.period = shared_.stats.report(now),
             .uptime_seconds = std::chrono::duration<double>(now - started_).count(),
             .report_period_seconds = std::chrono::duration<double>(config_.report_period).count()};
  stat_protobuf_ = metrics::encode_stat_protobuf(config_.pod, sample_);
}

// queue-proxy's :9090 mux has "/metrics" for every method, and its handler answers the Stat protobuf
// whatever the Accept header.
asio::awaitable<ControlResponse> ControlPlane::serve_stats(const ControlRequest& req) {
  if (auto refusal = net::go_mux_refusal(req, {.path = "/metrics"})) co_return std::move(*refusal);
  if (parked_) {
    // No period closes while parked, and the published sample is the all-zero one: a scrape refreshes
    // its uptime only. Closing a period here could publish the first arrival after idle for the few
    // microseconds before the reporter, woken by that arrival, replaces it: a scraper would miss it.
    sample_.uptime_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    stat_protobuf_ = metrics::encode_stat_protobuf(config_.pod, sample_);
  }
  co_return ControlResponse{.content_type = "application/protobuf", .body = stat_protobuf_};
}

// "GET /metrics", as knative.dev/pkg's Prometheus server registers it.
asio::awaitable<ControlResponse> ControlPlane::serve_user_metrics(const ControlRequest& req) {
  if (auto refusal = net::go_mux_refusal(req, {.path = "/metrics", .get_only = true})) co_return std::move(*refusal);
  if (shared_.breaker) shared_.request_metrics->set_legacy_queue_depth(static_cast<double>(shared_.breaker->occupancy()));
  auto body = shared_.request_metrics->text();
  if (shared_.tracer) append_tracing_counters(body, shared_.tracer->exporter());
  ControlResponse r{.content_type = kPrometheusText, .body = std::move(body)};
  if (net::prefers_gzip(req[http::field::accept_encoding])) {  // Prometheus asks for gzip, as promhttp offers it
    if (auto packed = net::gzip(r.body)) {
      r.body = std::move(*packed);
      r.headers.emplace_back("Content-Encoding", "gzip");
    }
  }
  co_return r;
}

asio::awaitable<void> ControlPlane::reset_unless_terminated() {
  asio::steady_timer t(io_, config_.drain_reset_after);
  co_await t.async_wait(use_nothrow);
  if (!terminating_) {
    log::info("no SIGTERM after /wait-for-drain: draining reset");
    shared_.drainer.reset();
  }
}

asio::awaitable<void> ControlPlane::reset_when_app_restarts() {
  if (watching_app_) co_return;
  watching_app_ = true;
  constexpr Millis kPeriod{200}, kTryTimeout{500};
  asio::steady_timer t(io_);
  bool went_away = false;
  while (!terminating_) {
    t.expires_after(kPeriod);
    co_await t.async_wait(use_nothrow);
    if (terminating_) break;
    bool up = co_await shared_.readiness.try_once(kTryTimeout);
    if (!up && !went_away) {
      log::info("the app went away after /wait-for-drain: draining holds until SIGTERM or its restart");
      went_away = true;
    } else if (up && went_away) {
      log::info("the app restarted after /wait-for-drain: draining reset");
      shared_.drainer.reset();
      break;
    }
  }
  watching_app_ = false;
}

asio::awaitable<ControlResponse> ControlPlane::serve_admin(const ControlRequest& req) {
  if (auto refusal = net::go_mux_refusal(req, {.path = "/wait-for-drain"})) co_return std::move(*refusal);
  {
    // The app's preStop hook: hold it until the proxy has drained, so the app keeps serving till then.
    log::info("draining requested").kv("by", "/wait-for-drain");
    shared_.drainer.start(Clock::now());
    if (!terminating_) {
      asio::co_spawn(io_, config_.drain_reset == ControlConfig::DrainReset::app_restart ? reset_when_app_restarts()
                                                                                       : reset_unless_terminated(),
                     asio::detached);
    }
    co_await shared_.drainer.wait_drained();
    co_return ControlResponse{.body = "drained\n"};
  }
}

void ControlPlane::close_listeners() {
  for (auto& l : listeners_) l->close();
}

void ControlPlane::terminate() {
  if (terminating_) return;
  terminating_ = true;
  shared_.drainer.start(Clock::now());
}

asio::awaitable<void> ControlPlane::drained() {
  // A /wait-for-drain reset can only happen before terminate(); after it, waiting ends in a drain.
  // (Not `while (!co_await ...)`: GCC 12 miscompiles a co_await in a loop condition.)
  while (true) {
    bool done = co_await shared_.drainer.wait_drained();
    if (done) break;
    shared_.drainer.start(Clock::now());
  }
}

}  // namespace sluice::proxy
