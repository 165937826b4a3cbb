// The mode dispatch, shared by main() and by the children per-node mode's zygote forks (app/node/zygote.h):
// each runs its mode exactly as the binary would; configuration errors print one line and exit 2.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "app/modes.h"
#include "common/config_error.h"
#include "proxy/io/listen.h"

namespace sluice::app {
namespace {

constexpr std::string_view kUsage =
    "usage: sluice <mode> [options]\n"
    "modes:\n"
    "  sidecar      queue-proxy drop-in, configured by Knative's env vars (or --flags)\n"
    "  gateway      local serverless gateway: sluice gateway -- CMD ARGS\n"
    "  run          run one app instance under the runtime: sluice run -- CMD ARGS\n"
    "  autoscaler   KPA tools: sluice autoscaler simulate --trace FILE.csv; autoscaler serve (KEDA)\n"
    "  node         per-node agent: serves every pod the kubelet publishes to it (sluice-csi) and that joins it\n"
    "  node-stub    a pod's side of per-node mode, in queue-proxy's place: joins the agent, drains on SIGTERM\n"
    "  help         this text; --version prints the version\n"
    "Run 'sluice <mode> --help' for a mode's options. The container image runs 'sluice sidecar'.\n";

// The per-thread free lists' budget (common/thread_cache.h) is read inside operator new, where a bad
// value can only be ignored; it is checked here, first, so a typo is an error naming the key.
void check_thread_cache_budget() {
  const char* text = std::getenv("SLUICE_THREAD_CACHE_KIB");
  if (!text) return;
  std::string_view v(text);
  bool digits = !v.empty() && v.size() <= 7 && v.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits || std::strtoul(text, nullptr, 10) > (1ul << 20))
    throw ConfigError("SLUICE_THREAD_CACHE_KIB=\"" + std::string(v) +
                      "\": expected KiB per thread from 0 (no cache) to 1048576");
}

}  // namespace

int run_mode(std::string_view mode, Args args) {
  // A peer that resets a connection is an error value on the write, never a signal: OpenSSL writes the
  // TLS sockets itself (proxy/io/tls_socket.h) without MSG_NOSIGNAL. Children get the default back (spawn.cpp).
  std::signal(SIGPIPE, SIG_IGN);
  // No mode is a person trying the binary: show what it does (the image's CMD names the sidecar mode).
  if (mode.empty()) {
    std::fputs(kUsage.data(), stderr);
    return 2;
  }
  try {
    check_thread_cache_budget();
    if (mode == "sidecar") return run_sidecar(args);
    if (mode == "gateway") return run_gateway(args);
    if (mode == "run") return run_instance(args);
    if (mode == "autoscaler") return run_autoscaler(args);
    if (mode == "node") return run_node(args);
    if (mode == "node-stub") return run_node_stub(args);
    if (mode == "node-zygote") return run_node_zygote(args);
    if (mode == "--version" || mode == "-V" || mode == "version") {
      std::printf("sluice %s\n", SLUICE_VERSION);
      return 0;
    }
    if (mode == "--help" || mode == "-h" || mode == "help") {
      // `sluice help MODE` is `sluice MODE --help`, as `git help` and `kubectl help` do.
      if (!args.empty() && args[0] != "help" && !args[0].starts_with("-") && args[0] != "node-zygote") {
        const std::string_view of = args[0];
        const std::vector<std::string_view> help = {"--help"};
        return run_mode(of, help);
      }
      std::fputs(kUsage.data(), stdout);
      return 0;
    }
    std::fprintf(stderr, "sluice: unknown mode '%.*s'\n%s", static_cast<int>(mode.size()), mode.data(),
                 kUsage.data());
    return 2;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "sluice: configuration error: %s\n", e.what());
    return 2;
  } catch (const proxy::AddressInUse& e) {
    std::fprintf(stderr, "sluice: %s\n", e.what());  // as nginx words it; exit 1 like any start-up failure
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: fatal: %s\n", e.what());
    return 1;
  }
}

}  // namespace sluice::app
