// `sluice sidecar`: the queue-proxy drop-in. Parses the configuration, starts the proxy, drains on
// SIGTERM/SIGINT and exits 0.
#include <csignal>
#include <cstdio>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "app/modes.h"
#include "app/sidecar_config.h"
#include "common/log.h"
#include "proxy/server.h"

namespace sluice::app {

int run_sidecar(Args args) {
  SidecarConfig cfg = parse_sidecar_config(process_env(), args);
  if (cfg.help) {
    std::fputs(cfg.help_text.c_str(), stdout);
    return 0;
  }
  log::Level level = log::Level::info;
  log::parse_level(cfg.logging_level, level);
  log::set_level(level);
  {
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
  if (cfg.revision_timeout_disabled)
    log::warn("REVISION_TIMEOUT_SECONDS=0: no request timeout (queue-proxy would answer 504 to every request)");

  // Block the signals before any worker thread starts, so only the signal_set sees them.
  boost::asio::io_context signals_io(1);
  boost::asio::signal_set signals(signals_io, SIGTERM, SIGINT);

  proxy::Server server(cfg.proxy);
  server.start();
  log::info("listening")
      .kv("listener", "proxy")
      .kv("address", cfg.proxy.listen_address)
      .kv("port", static_cast<unsigned>(server.port()))
      .kv("upstream", cfg.proxy.upstream_host + ":" + std::to_string(cfg.proxy.upstream_port))
      .kv("workers", server.workers())
      .kv("container_concurrency", cfg.container_concurrency);

  int received = 0;
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (!ec) received = sig;
  });
  signals_io.run();
  log::info("draining").kv("signal", received).kv("in_flight_connections", server.open_connections());
  server.shutdown(cfg.drain_timeout);
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
