// `sluice autoscaler simulate|serve`: the KPA tools. simulate replays a load trace through the KPA and
// prints its decisions as CSV; serve runs KEDA's external scaler, which is the sluice-autoscaler binary
// next to this one (a program of its own, so the sidecar carries no gRPC).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>

#include "app/modes.h"
#include "autoscaler/config.h"
#include "autoscaler/config_text.h"
#include "autoscaler/simulator.h"
#include "autoscaler/trace.h"
#include "common/config_error.h"

namespace sluice::app {
namespace {

constexpr std::string_view kHelp =
    "usage: sluice autoscaler simulate --trace FILE.csv [--config FILE]\n"
    "       sluice autoscaler serve [--listen ADDRESS] [--grpc-port PORT] [--metrics-port PORT]\n"
    "\n"
    "simulate replays a load trace through Knative's KPA and prints its decisions.\n"
    "  --trace FILE   CSV rows time,value[,ready]: time in whole seconds from the start; value is the\n"
    "                 total concurrency (or requests/s with metric: rps) over all instances from that\n"
    "                 second on; ready (optional) the ready instances, otherwise instances are assumed\n"
    "                 ready as soon as they are wanted. A header line is allowed.\n"
    "  --config FILE  `key: value` lines with Knative's config-autoscaler keys, e.g.\n"
    "                 stable-window: 60s, container-concurrency-target-default: 100,\n"
    "                 container-concurrency-target-percentage: 70, target-burst-capacity: 211,\n"
    "                 min-scale: 0, and the per-service keys metric, target, container-concurrency,\n"
    "                 target-utilization-percentage, activation-scale, metric-aggregation-algorithm.\n"
    "                 Unset keys take Knative's defaults.\n"
    "\n"
    "The value is recorded every second; a decision is printed every 2 s, and at once when requests\n"
    "arrive at zero instances. Output columns:\n"
    "  time                   seconds\n"
    "  observed               the trace's value at that second\n"
    "  stable, panic          the value averaged over the stable and the panic window\n"
    "  ready                  ready instances the decision saw\n"
    "  desired                the scale applied: the decider's count after min/max/initial scale and\n"
    "                         Knative's scale-to-zero timing (active a stable window, then the grace\n"
    "                         period or pod retention); kept as it was while a revision is deactivated\n"
    "  excess_burst_capacity  spare capacity beyond target-burst-capacity (negative: too little)\n"
    "  buffer                 1 when requests must pass the cold-start buffer (Knative's activator)\n"
    "  mode                   stable, panic, or no-data\n"
    "On stderr, when each instance count is reached: `t=70s 1 -> 0 instances (decider 0, inactive, ...)`.\n"
    "\n"
    "serve runs KEDA's external scaler (sluice-autoscaler, installed next to sluice); see\n"
    "'sluice autoscaler serve --help'.\n";

std::string read_file(std::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(std::string(flag) + ": '" + path + "' is not allowed: cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int simulate(Args args) {
  std::string trace_path, config_path;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp.data(), stdout);
      return 0;
    }
    std::string* target = arg == "--trace" ? &trace_path : arg == "--config" ? &config_path : nullptr;
    if (target == nullptr) throw ConfigError("autoscaler simulate: unknown argument '" + std::string(arg) + "'");
    if (i + 1 >= args.size()) throw ConfigError(std::string(arg) + ": a file name is missing");
    *target = std::string(args[++i]);
  }
  if (trace_path.empty()) throw ConfigError("--trace: missing (usage: sluice autoscaler simulate --trace FILE)");

  autoscaler::AutoscalerConfig config;
  if (!config_path.empty()) {
    config = autoscaler::config_from_data(
        autoscaler::parse_config_text(read_file("--config", config_path), config_path));
  }
  const auto trace = autoscaler::parse_trace(read_file("--trace", trace_path), trace_path);
  const auto rows = autoscaler::simulate(trace, config);
  const std::string csv = autoscaler::simulation_csv(rows);
  std::fwrite(csv.data(), 1, csv.size(), stdout);
  bool ready_from_trace = false;
  for (const auto& p : trace) ready_from_trace = ready_from_trace || p.ready.has_value();
  const auto steps = autoscaler::scale_timeline(rows, ready_from_trace);
  const std::string timeline = autoscaler::timeline_text(steps);
  std::fwrite(timeline.data(), 1, timeline.size(), stderr);
  return 0;
}

// Replaces this process with sluice-autoscaler from this binary's own directory.
int serve(Args args) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto scaler = (ec ? std::filesystem::path(".") : self.parent_path()) / "sluice-autoscaler";
  std::vector<std::string> argv_text = {scaler.string()};
  for (const auto a : args) argv_text.emplace_back(a);
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  const int err = errno;
  std::fprintf(stderr,
               "sluice: autoscaler serve runs %s, which %s: build the sluice_autoscaler_bin target (it "
               "needs libgrpc++-dev) or use the sluice-autoscaler image\n",
               argv[0], err == ENOENT ? "is not there" : std::strerror(err));
  return 2;
}

}  // namespace

int run_autoscaler(Args args) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    std::fputs(kHelp.data(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args.front() == "simulate") return simulate(args.subspan(1));
  if (args.front() == "serve") return serve(args.subspan(1));
  std::fprintf(stderr, "sluice: unknown autoscaler command '%.*s'\n%s", static_cast<int>(args.front().size()),
               args.front().data(), kHelp.data());
  return 2;
}

}  // namespace sluice::app
