// Autoscaler configuration: Knative's config-autoscaler keys (and the per-revision annotation keys that
// matter to one service), with Knative's defaults, validated once at start.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoscaler/bucketed_window.h"
#include "autoscaler/time.h"

namespace sluice::autoscaler {

inline constexpr double kTargetMin = 0.01;  // Knative's autoscaling.TargetMin: the least target a pod can have

enum class ScalingMetric { concurrency, rps };

struct AutoscalerConfig {
  // config-autoscaler ConfigMap keys, Knative defaults (pkg/autoscaler/config/config.go).
  bool enable_scale_to_zero = true;                     // enable-scale-to-zero
  double container_concurrency_target_default = 100;    // container-concurrency-target-default
  double container_concurrency_target_fraction = 0.7;  // container-concurrency-target-percentage, as a fraction
  // Knative's TargetUtilization: the RPS metric's utilization. Not a ConfigMap key (its 0.7 is fixed there);
  // only the per-revision target-utilization-percentage below moves it.
  double rps_target_utilization = 0.7;
  double rps_target_default = 200;                      // requests-per-second-target-default
  double max_scale_up_rate = 1000;                      // max-scale-up-rate
  double max_scale_down_rate = 2;                       // max-scale-down-rate
  // target-burst-capacity: Knative's default is 211 (config.go defaultConfig), as SPEC §7 says; the issue's
  // 200 is not Knative's. -1 = the cold-start buffer always stays in the path, 0 = never needed for bursts.
  double target_burst_capacity = 211;
  double panic_window_percentage = 10;                  // panic-window-percentage, of the stable window
  double panic_threshold_percentage = 200;              // panic-threshold-percentage
  double activator_capacity = 100;                      // activator-capacity
  Duration stable_window = std::chrono::seconds(60);                   // stable-window
  Duration scale_to_zero_grace_period = std::chrono::seconds(30);      // scale-to-zero-grace-period
  Duration scale_to_zero_pod_retention_period = Duration::zero();      // scale-to-zero-pod-retention-period
  Duration scale_down_delay = Duration::zero();                        // scale-down-delay
  bool allow_zero_initial_scale = false;                // allow-zero-initial-scale
  std::int32_t initial_scale = 1;                       // initial-scale
  std::int32_t min_scale = 0;                           // min-scale
  std::int32_t max_scale = 0;                           // max-scale (0 = unbounded)
  std::int32_t max_scale_limit = 0;                     // max-scale-limit (0 = none)

  // Per-revision settings: annotations (autoscaling.knative.dev/<key>) or the revision spec in Knative.
  ScalingMetric metric = ScalingMetric::concurrency;    // metric: concurrency | rps
  double target = 0;                                    // target (0 = unset: the defaults above apply)
  // target-utilization-percentage: overrides the utilization of either metric, as Knative's annotation
  // does; the ConfigMap's container-concurrency-target-percentage applies to concurrency only.
  std::optional<double> target_utilization_percentage;
  std::int32_t container_concurrency = 0;               // container-concurrency (0 = unlimited)
  std::int32_t activation_scale = 0;                    // activation-scale (0 = off; else >= 2)
  Averaging aggregation = Averaging::linear;            // metric-aggregation-algorithm
  bool reachable = true;                                // false: a revision no route sends traffic to

  // Fixed in Knative (not keys): 1 s metric buckets and a decision every 2 s.
  Duration bucket_size = std::chrono::seconds(1);
  Duration tick_interval = std::chrono::seconds(2);
  // How long a revision may stay activating (wanted, not yet ready) before the KPA gives up and scales it
  // to zero: Knative's progress deadline (config-deployment, 600 s) plus its 30 s buffer. Not a key here;
  // the gateway sets it from its start deadline.
  Duration activation_timeout = std::chrono::seconds(630);
};

// Throws ConfigError naming the key, the value and what is allowed, for the first invalid setting. The
// ranges are those of Knative's config-autoscaler ConfigMap (config.go), plus the revision-only keys'
// (target, container-concurrency, activation-scale, target-utilization-percentage).
void validate(const AutoscalerConfig& config);

using ConfigData = std::map<std::string, std::string, std::less<>>;

// Applies `cluster` (config-autoscaler ConfigMap data: key → text value, Knative key names), then
// `revision` (the revision's autoscaling.knative.dev/ annotations, without the prefix) over the defaults,
// and validates: the merged result by the ConfigMap's rules, the revision's keys also by the annotation
// rules, which are stricter in places (scale-down-delay and pod retention at most 1 h,
// panic-threshold-percentage in [110, 1000]; Knative leaves the ConfigMap's threshold unchecked).
// Keys starting with '_' are ignored (Knative's `_example`); any other unknown key is an error naming it
// (Knative ignores unknown ConfigMap keys; sluice's choice, so that a typo is never silently dropped).
AutoscalerConfig config_from_data(const ConfigData& cluster, const ConfigData& revision);
// ConfigMap data only.
AutoscalerConfig config_from_data(const ConfigData& cluster);

// Every key config_from_data knows (config-autoscaler's and the per-revision annotations' names).
std::vector<std::string_view> config_keys();

// Knative's container-concurrency-max-limit default (config-defaults): the most a revision may admit.
inline constexpr std::int32_t kContainerConcurrencyMax = 1000;

// The panic window: stable window × percentage, rounded to whole seconds, at least one bucket.
Duration panic_window(const AutoscalerConfig& config);

}  // namespace sluice::autoscaler
