// The sluice modes; each takes the arguments after its name and returns the process exit code.
#pragma once

#include <span>
#include <string_view>

namespace sluice::app {

using Args = std::span<const std::string_view>;

int run_sidecar(Args args);      // app/sidecar/mode.cpp: the queue-proxy drop-in
int run_gateway(Args args);      // app/gateway/mode.cpp: local serverless gateway
int run_autoscaler(Args args);   // app/autoscaler/mode.cpp: `autoscaler simulate|serve`
int run_instance(Args args);     // app/run/mode.cpp: `run -- CMD`, one instance under the runtime
int run_node(Args args);         // app/node/mode.cpp: the per-node agent
int run_node_stub(Args args);    // app/node/stub.cpp: a pod's side of it, in queue-proxy's place
int run_node_zygote(Args args);  // app/node/zygote.cpp: the process the agent forks pods' proxies from

// `mode` run as `sluice MODE ARGS...` would run it (app/modes.cpp): "" prints the usage; an error of
// configuration is one line on stderr and 2.
int run_mode(std::string_view mode, Args args);

}  // namespace sluice::app
