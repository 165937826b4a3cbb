// The gateway's side of PodSandboxes: whether instances get pods (config `sandbox:` and what the machine
// allows), a pod per instance around its container, and the kubelet-style hooks run through Exec. The
// fleet calls these at the few points of an instance's life; nothing here knows about scaling or routing.
#pragma once

#include <optional>
#include <string>

#include "app/gateway/config.h"
#include "runtime/runtime_service.h"

namespace sluice::app::gateway {

class InstancePods {
 public:
  // Decides once: with `sandbox: on` an unusable machine is a ConfigError; with `auto` the gateway falls
  // back to host-network instances and logs why, once.
  InstancePods(const GatewayConfig& config, runtime::RuntimeService& runtime);

  bool enabled() const { return enabled_; }
  // Where an instance is, as seen from the host (`address`), and where the host is, as seen from inside
  // its pod (`host`: the host end of the pod's link; 127.0.0.1 without pods).
  struct Addresses {
    std::string address, host;
  };
  // Fills in the parts of `spec` the service's pod settings decide (user, sandbox, port); with pods, makes
  // the instance's pod. nullopt with `error` when the pod could not be made.
  std::optional<Addresses> open(const ServiceConfig& service, runtime::InstanceSpec& spec, std::string& error);
  // Removes the instance's pod (after its container); a no-op without pods.
  void close(const std::string& instance_id);
  // The service's postStart hook, if any: "" when it succeeded, else why it failed (kubelet kills then).
  std::string post_start(const ServiceConfig& service, const std::string& instance_id);
  // The service's preStop hook, if any, bounded by `grace`; returns the grace left for SIGTERM.
  std::chrono::milliseconds pre_stop(const ServiceConfig& service, const std::string& instance_id,
                                     std::chrono::milliseconds grace);

 private:
  const GatewayConfig& config_;
  runtime::RuntimeService& runtime_;
  bool enabled_ = false;
};

// A hook's outcome in one line: "exit 3: <output>" or "timed out after 2 s".
std::string describe(const runtime::ExecResult& r);

}  // namespace sluice::app::gateway
