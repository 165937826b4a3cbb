// `sluice gateway` configuration: the services to run and how, from the one-liner (`-- CMD ARGS`), a
// sluice.yaml, or a Procfile. Validated once at start; errors name the file, the key and what is allowed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autoscaler/config.h"

namespace sluice::app::gateway {

using Millis = std::chrono::milliseconds;

// Knative's config-features states: on for every service, on where a service opts in, or off.
enum class FeatureState { enabled, allowed, disabled };
std::string_view to_string(FeatureState s);

struct Features {
  FeatureState throttling = FeatureState::allowed;      // freeze instances with nothing in flight
  FeatureState scale_to_zero = FeatureState::enabled;   // stop the last instance after the grace period
  FeatureState h2c_upstream = FeatureState::allowed;    // talk h2c (prior knowledge) to instances
  // Knative's tag-header-based-routing: `Knative-Serving-Tag: <tag>` picks a tagged revision.
  FeatureState tag_header_routing = FeatureState::enabled;
};

// Knative's Service `traffic` entry: a share of requests (and/or a tag) for a named revision or the latest.
struct TrafficTarget {
  std::string revision;  // empty: the latest revision (latestRevision: true)
  int percent = 0;
  std::string tag;       // Knative-Serving-Tag: <tag>, and the host <tag>-<service>.localhost
  bool operator==(const TrafficTarget&) const = default;
};

struct ServiceConfig {
  std::string name;                      // K_SERVICE, and the prefix of instance names
  std::string where;                     // "file:line" of its definition, for messages
  std::string fingerprint;               // its definition's text: a different one makes a new revision
  std::vector<std::string> command;      // argv
  std::map<std::string, std::string> env;  // `env:` over `env-file:` over the gateway's `.env`
  // `env-file:` as written (relative to the config file's directory) and where, for messages; read by
  // load_file into `env`, whose values are never printed.
  std::vector<std::string> env_files;
  std::string env_files_where;
  std::string working_dir;
  std::string handler = "process";       // process | runc | crun
  std::string rootfs;                    // OCI handlers
  // An image to run instead (runtime/image_store.h: an OCI layout or the local podman store), with handler
  // runc unless crun is named: its rootfs, and its entrypoint/cmd/env/working dir/user where the service
  // does not set them. `command` then replaces the entrypoint and `args` the cmd (Kubernetes' rule).
  std::string image;
  std::optional<std::vector<std::string>> args;
  bool image_fallback = false;  // Knative YAML with a command: run it on this machine when the image is not here
  std::uint16_t port = 0;                // PORT for every instance; 0: a free port per instance
  std::vector<std::string> hosts;        // Host values routed here (port ignored, case-insensitive)
  bool is_default = false;               // gets requests whose Host matches no service
  std::string readiness_path;            // empty: TCP connect to PORT; else GET, any status but 5xx
  Millis start_deadline{std::chrono::minutes(4)};  // to listen on PORT (Cloud Run's 4 min)
  Millis grace{std::chrono::seconds(10)};           // SIGTERM to SIGKILL
  // Requests waiting for an instance (cold start, all busy): Knative activator's queue depth. Each holds
  // its connection and head, ~15 KiB (bench/README.md, 2026-12-02), so 10,000 ≈ 140 MiB at most.
  std::size_t buffer_size = 10000;
  Millis buffer_timeout{std::chrono::seconds(60)};  // longest wait there (then 504); the request timeout too
  std::optional<Millis> request_timeout;  // whole exchange for this service (Knative's timeoutSeconds)
  Millis throttle_delay{std::chrono::milliseconds(200)};  // idle this long before it is throttled
  std::vector<std::string> watch;   // globs (relative to the config file's directory): a change makes a revision
  std::vector<std::string> build;   // run before a new revision starts; a failure keeps the old one
  Millis build_timeout{std::chrono::minutes(10)};  // a build still running then is killed, and failed
  bool validate = true;                  // start one instance at start to prove the service can start
  // Per-service opt-ins, honoured when the gateway's feature state is `allowed`.
  std::optional<bool> throttling, scale_to_zero, h2c_upstream;
  autoscaler::AutoscalerConfig scaling;  // container-concurrency, min/max/initial scale, target, windows
  // Per instance pod (with `sandbox:` on): limits, the user it runs as, and its lifecycle hooks (kubelet's).
  std::optional<std::uint64_t> memory_bytes;  // `memory: 256Mi`; exceeded: OOMKilled and replaced
  std::optional<std::uint32_t> cpu_millis;    // `cpu: 500m` or `cpu: 0.5`
  std::optional<int> run_as_user, run_as_group;
  bool run_as_non_root = false;
  std::vector<std::string> pre_stop;    // run in the instance before SIGTERM, within the grace period
  std::vector<std::string> post_start;  // run in the instance after start; not ready until it succeeds
  // Knative Service documents: the revision's own name (spec.template.metadata.name), the revisions an
  // earlier document of the same Service defined (oldest first), and the traffic split. No `traffic`:
  // the latest revision takes every request.
  std::string revision_name;
  std::vector<ServiceConfig> earlier;
  std::vector<TrafficTarget> traffic;
};

// Instances in pods of their own (network namespace, address, cgroup): where possible, always, or never.
enum class SandboxMode { auto_, on, off };
std::string_view to_string(SandboxMode m);
std::optional<SandboxMode> parse_sandbox_mode(std::string_view text);

struct GatewayConfig {
  std::string source = "command line";  // file name, for messages
  std::string listen_address = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string admin_address = "127.0.0.1";
  std::uint16_t admin_port = 8079;       // /.sluice/status; 0: any free port (8022 is the sidecar's)
  // HTTPS (and h2 over it) on this port of the listen address, with a certificate from the local CA
  // (local_ca.h); off when unset. 0: any free port.
  std::optional<std::uint16_t> https_port;
  Millis request_timeout{std::chrono::minutes(5)};  // whole exchange, cold start included
  Millis drain_timeout{std::chrono::seconds(60)};   // in-flight exchanges at shutdown
  Millis accept_timeout{std::chrono::milliseconds(250)};  // a new connection taken by an instance (proxy's instance_accept)
  Millis debounce{std::chrono::milliseconds(300)};  // a burst of file changes makes one revision
  unsigned workers = 0;
  std::string throttle_mechanism = "auto";
  Features features;
  std::vector<ServiceConfig> services;
  std::string status_output = "auto";  // auto | tty | json | none
  bool request_lines = true;           // one log line a request
  SandboxMode sandbox = SandboxMode::off;
  std::string sandbox_network = "169.254.64.0/18";  // pods' /31 links; never routed off the machine
  std::string image_cache;  // unpacked images; empty: $SLUICE_IMAGE_CACHE, else ImageStore's default
  std::vector<std::string> warnings;  // fields read but not used (Knative YAML), said once at start
  bool metadata_server = true;        // GCE_METADATA_HOST for instances (a loopback port of its own)
  // Every service's environment file, compose's format (`env-file:` at the top; default `.env` beside the
  // config file, when it is there); read by load_file.
  std::vector<std::string> env_files{".env"};
  bool env_files_named = false;  // given in the file: each must exist
  std::string env_files_where;
  // The files other than the config file that load_file read (or looked for): a change is a config change.
  std::vector<std::string> inputs;
};

// Kubernetes quantities: "256Mi", "1G", "1000000" bytes; "500m", "0.5", "2" CPUs (as millis).
std::optional<std::uint64_t> parse_memory_quantity(std::string_view text);
std::optional<std::uint32_t> parse_cpu_quantity(std::string_view text);

// `https:` / --https: a port, or off (false, off, no).
std::optional<std::uint16_t> parse_https_port(const std::string& text, bool& ok);
// "PORT", "ADDRESS:PORT" or "[V6]:PORT" (a bare port keeps `default_host`); nullopt when malformed.
std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text,
                                                                     const std::string& default_host);

// Effective per-service switches, resolved from the feature states and the service's opt-ins.
bool throttling_on(const GatewayConfig& g, const ServiceConfig& s);
bool scale_to_zero_on(const GatewayConfig& g, const ServiceConfig& s);
bool h2c_upstream_on(const GatewayConfig& g, const ServiceConfig& s);

// `sluice gateway -- CMD ARGS`: one service "app" on :8080, throttling enabled (SPEC §9).
GatewayConfig one_liner(std::vector<std::string> command);
// Parses YAML text (`source` names it in errors); throws ConfigError.
GatewayConfig parse_yaml(const std::string& text, const std::string& source);
// Each `name: command` line a service; the first is the default; hosts <name>.localhost.
GatewayConfig parse_procfile(const std::string& text, const std::string& source);
// Knative `serving.knative.dev/v1` Service documents (several per file); see knative_yaml.cpp.
GatewayConfig parse_knative(const std::string& text, const std::string& source);
bool is_knative(const std::string& text);
// Reads a file: a Procfile when its name is "Procfile" (or ends in .procfile), Knative Service documents
// when it has them, sluice.yaml otherwise.
GatewayConfig load_file(const std::string& path);
// Cross-field checks (names unique, one default at most, ports); throws ConfigError.
void validate(GatewayConfig& config);

}  // namespace sluice::app::gateway
