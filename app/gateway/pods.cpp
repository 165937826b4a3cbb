// Pods and hooks for the gateway's instances; see pods.h.
#include "app/gateway/pods.h"

#include "common/config_error.h"
#include "common/log.h"

namespace sluice::app::gateway {
namespace {

constexpr std::size_t kHookOutputInLog = 400;  // bytes of a failed hook's output kept in its reason

std::string sandbox_id(const std::string& instance_id) { return instance_id; }

}  // namespace

std::string describe(const runtime::ExecResult& r) {
  if (!r.error.empty()) return r.error;
  std::string out = r.output.substr(0, kHookOutputInLog);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  std::string what = r.timed_out ? "timed out" : r.signal ? "killed by signal " + std::to_string(r.signal)
                                                          : "exit " + std::to_string(r.exit_code);
  return out.empty() ? what : what + ": " + out;
}

InstancePods::InstancePods(const GatewayConfig& config, runtime::RuntimeService& runtime)
    : config_(config), runtime_(runtime) {
  if (config.sandbox == SandboxMode::off) return;
  auto why = runtime.sandbox_unavailable_reason();
  if (!why) {
    enabled_ = true;
    return;
  }
  if (config.sandbox == SandboxMode::on)
    throw ConfigError(config.source + ": sandbox: on, but pods cannot be made here: " + *why);
  // Instances then share the host's network: a fixed port fits one instance only, as without pods.
  for (const auto& s : config.services)
    if (s.port != 0 && s.scaling.max_scale != 1)
      throw ConfigError(config.source + ": services." + s.name + ".port: without pods (" + *why +
                        ") a fixed port allows one instance only: set max-scale: 1 or port: 0");
  log::warn("sandboxes unavailable: instances run on the host's network without memory or cpu limits")
      .kv("event", "sandbox.fallback").kv("reason", *why);
}

std::optional<InstancePods::Addresses> InstancePods::open(const ServiceConfig& service,
                                                          runtime::InstanceSpec& spec, std::string& error) {
  if (service.run_as_user) spec.run_as_user = service.run_as_user;  // else the image's user, if any
  if (service.run_as_group) spec.run_as_group = service.run_as_group;
  spec.run_as_non_root = service.run_as_non_root;
  if (!enabled_) return Addresses{.address = "127.0.0.1", .host = "127.0.0.1"};
  runtime::PodSandboxConfig pod;
  pod.id = sandbox_id(spec.id);
  pod.limits.memory_bytes = service.memory_bytes;
  pod.limits.cpu_millis = service.cpu_millis;
  if (auto ok = runtime_.run_pod_sandbox(pod, spec.handler); !ok) {
    error = ok.error();
    return std::nullopt;
  }
  spec.sandbox = pod.id;
  // As in a pod: every instance listens on the same port, at an address of its own.
  spec.port = service.port ? service.port : 8080;
  const auto status = runtime_.pod_sandbox_status(pod.id);
  return Addresses{.address = status->address, .host = status->host_address};
}

void InstancePods::close(const std::string& instance_id) {
  if (!enabled_) return;
  if (auto ok = runtime_.remove_pod_sandbox(sandbox_id(instance_id)); !ok && runtime_.pod_sandbox_status(instance_id))
    log::warn("sandbox not removed").kv("instance", instance_id).kv("error", ok.error());
}

std::string InstancePods::post_start(const ServiceConfig& service, const std::string& instance_id) {
  if (service.post_start.empty()) return "";
  // Kubelet gives postStart no timeout of its own; the start deadline bounds it here.
  auto r = runtime_.exec(instance_id, service.post_start, service.start_deadline);
  log::info("postStart hook ran").kv("event", "hook.post_start").kv("instance", instance_id).kv("result", describe(r));
  return r.succeeded() ? "" : "postStart hook failed: " + describe(r);
}

std::chrono::milliseconds InstancePods::pre_stop(const ServiceConfig& service, const std::string& instance_id,
                                                 std::chrono::milliseconds grace) {
  if (service.pre_stop.empty()) return grace;
  auto st = runtime_.status(instance_id);
  if (!st || st->state != runtime::InstanceState::running) return grace;
  auto began = std::chrono::steady_clock::now();
  auto r = runtime_.exec(instance_id, service.pre_stop, grace);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
  auto line = r.succeeded() ? log::info("preStop hook ran") : log::warn("preStop hook failed");
  line.kv("event", "hook.pre_stop").kv("instance", instance_id).kv("result", describe(r))
      .kv("ms", static_cast<std::int64_t>(took.count()));
  return std::max(std::chrono::milliseconds(0), grace - took);
}

}  // namespace sluice::app::gateway
