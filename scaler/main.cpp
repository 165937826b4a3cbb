// sluice-autoscaler: KEDA's external scaler running Knative's KPA over the sidecars' Stat endpoints.
// `sluice autoscaler serve ARGS` runs this binary (it sits next to `sluice`); it is a program of its own
// so that the sidecar binary and image carry no gRPC. Configuration errors print one line and exit 2.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <future>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/config_error.h"
#include "common/control_listener.h"
#include "common/log.h"
#include "scaler/grpc_service.h"
#include "scaler/scaled_objects.h"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

constexpr std::string_view kHelp =
    "usage: sluice autoscaler serve [--listen ADDRESS] [--grpc-port PORT] [--metrics-port PORT]\n"
    "                               [--scrape-timeout-ms MS]\n"
    "\n"
    "KEDA's external scaler (externalscaler.ExternalScaler over gRPC) running Knative's KPA. For each\n"
    "ScaledObject whose trigger points here it scrapes every sidecar (GET :9090/metrics, Accept:\n"
    "application/protobuf) every second, and answers the KPA's desired pod count as the metric\n"
    "`kpa-desired-pods` with a target of 1 per pod; IsActive is true while the KPA wants a pod.\n"
    "\n"
    "  --listen ADDRESS          address of both listeners (default 0.0.0.0; :: for dual stack)\n"
    "  --grpc-port PORT          the ExternalScaler gRPC service (default 6000; 0 = any)\n"
    "  --metrics-port PORT       Prometheus text at /metrics: scrape errors per pod, decisions per\n"
    "                            ScaledObject (default 9090; 0 = any)\n"
    "  --scrape-timeout-ms MS    per-scrape timeout (default 800, at most 900: a round is 1 s)\n"
    "\n"
    "Trigger metadata: `sidecars` (required): a headless Service's DNS name (every A/AAAA record is a\n"
    "pod, looked up each round) or a comma list of host[:port], port 9090 by default. Any other key is a\n"
    "Knative autoscaling annotation (metric, target, target-utilization-percentage,\n"
    "container-concurrency, min-scale, max-scale, initial-scale, activation-scale, stable-window,\n"
    "panic-window-percentage, panic-threshold-percentage, scale-to-zero-grace-period, scale-down-delay,\n"
    "max-scale-up-rate, max-scale-down-rate, target-burst-capacity, metric-aggregation-algorithm, ...),\n"
    "with or without the autoscaling.knative.dev/ prefix. A malformed value is INVALID_ARGUMENT naming\n"
    "the key.\n";

struct Options {
  std::string listen = "0.0.0.0";
  std::uint16_t grpc_port = 6000;
  std::uint16_t metrics_port = 9090;
  std::chrono::milliseconds scrape_timeout{800};
};

long parse_number(std::string_view flag, std::string_view text, long low, long high) {
  long v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < low || v > high) {
    throw ConfigError(std::string(flag) + ": '" + std::string(text) + "' is not allowed: must be a number in [" +
                      std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return v;
}

// Flags as `--name value` or `--name=value`. Returns false for --help.
bool parse_options(std::vector<std::string_view> args, Options& o) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view flag = args[i], value;
    if (flag == "--help" || flag == "-h") return false;
    if (const auto eq = flag.find('='); eq != std::string_view::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw ConfigError(std::string(flag) + ": a value is missing");
    }
    if (flag == "--listen") {
      boost::system::error_code ec;
      boost::asio::ip::make_address(std::string(value), ec);
      if (ec) throw ConfigError("--listen: '" + std::string(value) + "' is not allowed: must be an IP address");
      o.listen = std::string(value);
    } else if (flag == "--grpc-port") {
      o.grpc_port = static_cast<std::uint16_t>(parse_number(flag, value, 0, 65535));
    } else if (flag == "--metrics-port") {
      o.metrics_port = static_cast<std::uint16_t>(parse_number(flag, value, 0, 65535));
    } else if (flag == "--scrape-timeout-ms") {
      o.scrape_timeout = std::chrono::milliseconds(parse_number(flag, value, 10, 900));
    } else {
      throw ConfigError("unknown argument '" + std::string(flag) + "' (see --help)");
    }
  }
  return true;
}

int serve(const Options& o) {
  boost::asio::io_context io(1);
  scaler::ScalerMetrics metrics;
  scaler::ScaledObjects objects(io, metrics, scaler::ScalerTiming{.scrape_timeout = o.scrape_timeout});

  net::ControlListener metrics_listener(io, "metrics", o.listen, o.metrics_port,
                                          [&metrics](const net::ControlRequest& req)
                                              -> boost::asio::awaitable<net::ControlResponse> {
                                            if (req.target() != "/metrics") {
                                              co_return net::ControlResponse{.status = 404, .body = "not found\n"};
                                            }
                                            co_return net::ControlResponse{
                                                .content_type = "text/plain; version=0.0.4; charset=utf-8",
                                                .body = metrics.text()};
                                          });

  auto service = scaler::make_external_scaler_service(objects);
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  const std::string host = o.listen.find(':') != std::string::npos ? "[" + o.listen + "]" : o.listen;
  builder.AddListeningPort(host + ":" + std::to_string(o.grpc_port), grpc::InsecureServerCredentials(), &grpc_port);
  builder.RegisterService(service.get());
  auto server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    throw std::runtime_error("grpc listener on " + host + ":" + std::to_string(o.grpc_port) + ": cannot listen");
  }

  metrics_listener.start();
  log::info("listening").kv("listener", "metrics").kv("address", o.listen)
      .kv("port", static_cast<unsigned>(metrics_listener.port()));
  log::info("listening").kv("listener", "grpc").kv("address", o.listen).kv("port", grpc_port);

  std::promise<int> signalled;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (!ec) signalled.set_value(signo);
  });
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });

  const int signo = signalled.get_future().get();
  log::info("shutting down").kv("signal", signo);
  objects.stop();  // wakes every RPC that waits on a decision, ends every stream
  server->Shutdown(std::chrono::system_clock::now() + 2s);
  work.reset();
  io.stop();  // scrapes in flight and idle /metrics connections are simply dropped
  io_thread.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  // Called directly or as `sluice autoscaler serve`, which passes what follows `serve`.
  if (!args.empty() && args.front() == "serve") args.erase(args.begin());
  try {
    Options o;
    if (!parse_options(args, o)) {
      std::fputs(kHelp.data(), stdout);
      return 0;
    }
    return serve(o);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "sluice-autoscaler: configuration error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-autoscaler: fatal: %s\n", e.what());
    return 1;
  }
}
