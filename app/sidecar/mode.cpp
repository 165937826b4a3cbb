// `sluice sidecar`: the queue-proxy drop-in. Parses the configuration, starts the proxy on its workers
// and the control plane (stats, metrics, admin) on a thread of its own; on SIGTERM/SIGINT drains as
// queue-proxy does (health checks fail, quiet period, in-flight exchanges finish) and exits 0. SIGQUIT, as
// nginx's: a successor took the listening sockets (per-node mode's restart), so stop accepting at once, let
// in-flight exchanges finish and exit 0, health checks passing all the while.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "app/modes.h"
#include "app/sidecar/config.h"
#include "app/sidecar/node_channel.h"
#include "common/blocked_signals.h"
#include "common/listen.h"
#include "common/log.h"
#include "proxy/server/control_plane.h"
#include "proxy/server/server.h"
#include "proxy/telemetry/metrics_pusher.h"

namespace sluice::app {
namespace {

namespace asio = boost::asio;

void set_log_identity(const SidecarConfig& cfg) {
  std::string fields;
  log::append_json_string(fields, "knative.dev/key");
  fields += ':';
  log::append_json_string(fields, cfg.namespace_name + "/" + cfg.revision);
  fields += ',';
  log::append_json_string(fields, "knative.dev/pod");
  fields += ':';
  log::append_json_string(fields, cfg.pod);
  log::set_static_fields(std::move(fields));
}

}  // namespace

int run_sidecar(Args args) {
  SidecarConfig cfg = parse_sidecar_config(process_env(), args);
  if (cfg.help) {
    std::fputs(cfg.help_text.c_str(), stdout);
    return 0;
  }
  log::Level level = log::Level::info;
  log::parse_level(cfg.logging_level, level);
  log::set_level(level);
  set_log_identity(cfg);
  if (!cfg.not_acted_on.empty()) {
    std::string names;
    for (const auto& n : cfg.not_acted_on) names += (names.empty() ? "" : ", ") + n;
    log::warn("queue-proxy settings accepted but not acted on by sluice").kv("settings", names);
  }
  if (!cfg.request_log_error.empty())
    log::error("Error setting up request logger. Request logs will be unavailable.").kv("error", cfg.request_log_error);
  if (cfg.revision_timeout_disabled)
    log::warn("REVISION_TIMEOUT_SECONDS=0: no request timeout (queue-proxy would answer 504 to every request)");

  // The signal set exists before any worker thread starts, and the threads started have its signals
  // blocked, so that they reach this thread, which waits for them in the control loop.
  asio::io_context control(1);
  asio::signal_set signals(control, SIGTERM, SIGINT, SIGQUIT);
  std::optional<BlockedSignals> others_blocked(std::in_place, std::initializer_list<int>{SIGTERM, SIGINT, SIGQUIT});

  net::inherit_listeners(cfg.listen_fds);  // before the first port opens
  proxy::Server server(cfg.proxy);
  const bool push_metrics = cfg.metrics_push.protocol != proxy::telemetry::ExportProtocol::none;
  if (cfg.user_metrics || push_metrics) {
    server.shared().request_metrics = std::make_unique<metrics::RequestMetrics>(
        metrics::RequestMetricsConfig{.pod = cfg.control.pod,
                                      .service = cfg.service,
                                      .names = cfg.metric_names,
                                      .resource = cfg.metrics_push.resource,
                                      .app_port = cfg.proxy.upstream_port});
  }
  if (cfg.tracing.protocol != proxy::telemetry::ExportProtocol::none) {
    using proxy::telemetry::ExportProtocol;
    server.shared().tracer = std::make_unique<proxy::telemetry::Tracer>(cfg.tracing, cfg.proxy.upstream_port);
    const auto p = cfg.tracing.protocol;
    log::info("tracing")
        .kv("protocol", p == ExportProtocol::otlp_grpc   ? "grpc"
                        : p == ExportProtocol::otlp_http ? "http/protobuf"
                        : p == ExportProtocol::zipkin    ? "zipkin"
                                                         : "stdout")
        .kv("endpoint", p == ExportProtocol::stdout_json ? std::string("stdout") : cfg.tracing.endpoint.text())
        .kv("sampling_rate", cfg.tracing.sampling_rate)
        .kv("service_name", cfg.tracing.service_name);
  }
  std::unique_ptr<proxy::telemetry::MetricsPusher> pusher;  // stops (after a last push) before the server goes
  if (push_metrics) {
    auto& shared = server.shared();
    pusher = std::make_unique<proxy::telemetry::MetricsPusher>(
        cfg.metrics_push, *shared.request_metrics, [&shared]() -> std::optional<double> {
          // As queue-proxy's gauge: the value the last request recorded as it passed the breaker.
          if (auto depth = shared.request_metrics->queue_depth()) return static_cast<double>(*depth);
          return std::nullopt;
        });
    log::info("request metrics push")
        .kv("protocol", cfg.metrics_push.protocol == proxy::telemetry::ExportProtocol::otlp_grpc ? "grpc" : "http/protobuf")
        .kv("endpoint", cfg.metrics_push.endpoint.text())
        .kv("interval_ms", static_cast<std::int64_t>(cfg.metrics_push.interval.count()));
  }
  proxy::ControlPlane plane(control, server.shared(), cfg.control);
  if (!cfg.proxy.netns.own())
    log::info("serving a pod from outside its network namespace").kv("netns", cfg.proxy.netns.path());
  server.start();
  plane.start();
  if (const auto unclaimed = net::close_unclaimed_listeners())
    log::warn("listening sockets handed over but bound to no port of this configuration: closed")
        .kv("count", static_cast<std::int64_t>(unclaimed));
  for (const auto& l : plane.listeners())
    log::info("listening").kv("listener", l.name).kv("address", cfg.control.listen_address).kv("port", static_cast<unsigned>(l.port));
  if (server.tls_port() != 0)
    log::info("listening").kv("listener", "tls").kv("address", cfg.proxy.listen_address)
        .kv("port", static_cast<unsigned>(server.tls_port())).kv("cert", cfg.proxy.tls->cert_file)
        .kv("min_version", cfg.proxy.tls->min_version == proxy::TlsVersion::v1_3 ? "1.3" : "1.2")
        .kv("max_version", cfg.proxy.tls->max_version == proxy::TlsVersion::v1_3 ? "1.3" : "1.2");
  // Last: harnesses wait for this line, by which time every port above is bound.
  log::info("listening")
      .kv("listener", "proxy")
      .kv("address", cfg.proxy.listen_address)
      .kv("port", static_cast<unsigned>(server.port()))
      .kv("upstream", cfg.proxy.upstream_host + ":" + std::to_string(cfg.proxy.upstream_port))
      .kv("upstream_protocol", cfg.proxy.upstream_protocol == proxy::ProxyConfig::UpstreamProtocol::h2c      ? "h2c"
                               : cfg.proxy.upstream_protocol == proxy::ProxyConfig::UpstreamProtocol::detect ? "detect"
                                                                                                             : "http1")
      .kv("workers", server.workers())
      .kv("container_concurrency", cfg.container_concurrency);
  if (cfg.node_channel >= 0) {
    // Per-node mode: the agent keeps the sockets, to hand them to this proxy's successor when it restarts.
    const auto fds = net::listening_descriptors();
    if (!send_message(cfg.node_channel, encode_listening(fds)))
      log::warn("the listening sockets could not be handed to the node agent").kv("error", std::strerror(errno));
    ::close(cfg.node_channel);
  }

  // The control loop runs on this thread; once drained, the server's shutdown (which blocks until the
  // exchanges in flight end) runs on one more while the control loop keeps answering, then stops it. No
  // thread of its own for the control loop: in per-node mode every pod's proxy would keep one idle.
  others_blocked.reset();
  std::thread stopper;
  auto stop = [&](proxy::Server::Listeners listeners) {
    const BlockedSignals for_the_stopper{SIGTERM, SIGINT, SIGQUIT};  // a second signal still comes here
    stopper = std::thread([&server, &control, &cfg, listeners] {
      log::info("drained: closing listeners").kv("open_connections", server.open_connections());
      server.shutdown(cfg.drain, listeners);
      control.stop();
    });
  };
  asio::co_spawn(control, [&]() -> asio::awaitable<void> {
    bool first = true;
    while (true) {
      auto [ec, sig] = co_await signals.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      if (!first) {
        // As queue-proxy (knative.dev/pkg/signals): a second signal ends the process at once, exit 1.
        log::warn("second signal: exiting at once").kv("signal", sig).kv("open_connections", server.open_connections());
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(1);
      }
      first = false;
      if (sig == SIGQUIT) {
        log::info("handed over: closing listeners").kv("signal", sig).kv("open_connections", server.open_connections());
        plane.close_listeners();
        stop(proxy::Server::Listeners::handed_over);
        continue;
      }
      log::info("draining").kv("signal", sig).kv("open_connections", server.open_connections());
      plane.terminate();
      asio::co_spawn(control, [&]() -> asio::awaitable<void> {
        co_await plane.drained();
        stop(proxy::Server::Listeners::ours);
      }, asio::detached);
    }
  }, asio::detached);
  control.run();
  stopper.join();
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
