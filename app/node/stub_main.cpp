// sluice-node-stub: `sluice node-stub` as a binary of its own, for the queue-proxy container of a pod on a
// per-node cluster (deploy/node). The pod runs it for its whole life, and every byte of memory it keeps is
// kept once per pod: without the proxy, TLS and runtime libraries the whole sluice loads, it keeps about a
// third of what `sluice node-stub` does (bench/README.md, "Per-node mode").
#include <csignal>
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "app/modes.h"
#include "common/config_error.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a gone agent is an error on the write, never a signal
  std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return sluice::app::run_node_stub(args);
  } catch (const sluice::ConfigError& e) {
    std::fprintf(stderr, "sluice-node-stub: configuration error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-node-stub: fatal: %s\n", e.what());
    return 1;
  }
}
