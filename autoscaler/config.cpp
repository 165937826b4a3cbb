// Parsing and validation of the autoscaler configuration; messages name the key, the value and what is
// allowed, and the ranges are Knative's (config.go and the annotation validation of pkg/apis/autoscaling).
#include "autoscaler/config.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <sstream>
#include <utility>
#include <vector>

#include "autoscaler/go_duration.h"
#include "common/config_error.h"

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

constexpr auto kWindowMin = 6s;      // autoscaling.WindowMin
constexpr auto kWindowMax = 1h;      // autoscaling.WindowMax
constexpr std::string_view kKpaClass = "kpa.autoscaling.knative.dev";

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

[[noreturn]] void fail(std::string_view key, const std::string& value, std::string_view allowed) {
  throw ConfigError(std::string(key) + ": '" + value + "' is not allowed: " + std::string(allowed));
}

double parse_number(std::string_view key, const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v)) fail(key, text, "must be a number");
  return v;
}

std::int32_t parse_int32(std::string_view key, const std::string& text) {
  std::int32_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end) fail(key, text, "must be a whole number (32-bit)");
  return v;
}

bool parse_bool(std::string_view key, const std::string& text) {
  // Go's strconv.ParseBool, which Knative's ConfigMap parsing uses.
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == f) return false;
  }
  fail(key, text, "must be true or false");
}

Duration parse_duration(std::string_view key, const std::string& text) {
  const auto d = parse_go_duration(text);
  if (!d) fail(key, text, "must be a duration such as 60s, 1m30s or 500ms");
  return *d;
}

using Setter = std::function<void(AutoscalerConfig&, std::string_view key, const std::string&)>;

const std::vector<std::pair<std::string_view, Setter>>& setters() {
  static const std::vector<std::pair<std::string_view, Setter>> table = {
      {"enable-scale-to-zero", [](auto& c, auto k, auto& v) { c.enable_scale_to_zero = parse_bool(k, v); }},
      {"allow-zero-initial-scale",
       [](auto& c, auto k, auto& v) { c.allow_zero_initial_scale = parse_bool(k, v); }},
      {"max-scale-up-rate", [](auto& c, auto k, auto& v) { c.max_scale_up_rate = parse_number(k, v); }},
      {"max-scale-down-rate", [](auto& c, auto k, auto& v) { c.max_scale_down_rate = parse_number(k, v); }},
      {"container-concurrency-target-percentage",
       [](auto& c, auto k, auto& v) {
         // Legacy: values in (0, 1] are fractions already; larger ones are percentages.
         const double p = parse_number(k, v);
         if (p <= 0 || p > 100) fail(k, v, "must be a percentage in (0, 100]");
         c.container_concurrency_target_fraction = p > 1 ? p / 100 : p;
       }},
      {"target-utilization-percentage",
       [](auto& c, auto k, auto& v) { c.target_utilization_percentage = parse_number(k, v); }},
      {"container-concurrency-target-default",
       [](auto& c, auto k, auto& v) { c.container_concurrency_target_default = parse_number(k, v); }},
      {"requests-per-second-target-default",
       [](auto& c, auto k, auto& v) { c.rps_target_default = parse_number(k, v); }},
      {"target-burst-capacity", [](auto& c, auto k, auto& v) { c.target_burst_capacity = parse_number(k, v); }},
      {"panic-window-percentage",
       [](auto& c, auto k, auto& v) { c.panic_window_percentage = parse_number(k, v); }},
      {"panic-threshold-percentage",
       [](auto& c, auto k, auto& v) { c.panic_threshold_percentage = parse_number(k, v); }},
      {"activator-capacity", [](auto& c, auto k, auto& v) { c.activator_capacity = parse_number(k, v); }},
      {"initial-scale", [](auto& c, auto k, auto& v) { c.initial_scale = parse_int32(k, v); }},
      {"min-scale", [](auto& c, auto k, auto& v) { c.min_scale = parse_int32(k, v); }},
      {"max-scale", [](auto& c, auto k, auto& v) { c.max_scale = parse_int32(k, v); }},
      {"max-scale-limit", [](auto& c, auto k, auto& v) { c.max_scale_limit = parse_int32(k, v); }},
      {"stable-window", [](auto& c, auto k, auto& v) { c.stable_window = parse_duration(k, v); }},
      {"scale-down-delay", [](auto& c, auto k, auto& v) { c.scale_down_delay = parse_duration(k, v); }},
      {"scale-to-zero-grace-period",
       [](auto& c, auto k, auto& v) { c.scale_to_zero_grace_period = parse_duration(k, v); }},
      {"scale-to-zero-pod-retention-period",
       [](auto& c, auto k, auto& v) { c.scale_to_zero_pod_retention_period = parse_duration(k, v); }},
      {"pod-autoscaler-class",
       [](auto&, auto k, auto& v) {
         if (v != kKpaClass) fail(k, v, "only kpa.autoscaling.knative.dev is implemented");
       }},
      {"metric",
       [](auto& c, auto k, auto& v) {
         if (v == "concurrency") {
           c.metric = ScalingMetric::concurrency;
         } else if (v == "rps") {
           c.metric = ScalingMetric::rps;
         } else {
           fail(k, v, "must be concurrency or rps (cpu and memory are HPA metrics)");
         }
       }},
      {"target",
       [](auto& c, auto k, auto& v) {
         // Knative's annotation: at least 0.01. 0 is rejected, not taken as "unset".
         c.target = parse_number(k, v);
         if (c.target < kTargetMin) fail(k, v, "must be at least 0.01");
       }},
      {"container-concurrency",
       [](auto& c, auto k, auto& v) { c.container_concurrency = parse_int32(k, v); }},
      {"activation-scale", [](auto& c, auto k, auto& v) { c.activation_scale = parse_int32(k, v); }},
      {"metric-aggregation-algorithm",
       [](auto& c, auto k, auto& v) {
         if (v == "linear") {
           c.aggregation = Averaging::linear;
         } else if (v == "weighted-exponential" || v == "weightedExponential") {
           c.aggregation = Averaging::weighted_exponential;
         } else {
           fail(k, v, "must be linear or weighted-exponential");
         }
       }},
  };
  return table;
}

void require(bool ok, std::string_view key, const std::string& value, std::string_view allowed) {
  if (!ok) fail(key, value, allowed);
}

}  // namespace

void validate(const AutoscalerConfig& c) {
  const auto d = [](Duration v) { return format_duration(v); };
  const auto n = [](double v) { return number_text(v); };
  const auto i = [](std::int32_t v) { return std::to_string(v); };
  require(c.scale_to_zero_grace_period > Duration::zero(), "scale-to-zero-grace-period",
          d(c.scale_to_zero_grace_period), "must be positive");
  require(c.scale_down_delay >= Duration::zero() && c.scale_down_delay % 1s == Duration::zero(),
          "scale-down-delay", d(c.scale_down_delay), "must be non-negative whole seconds");
  require(c.scale_to_zero_pod_retention_period >= Duration::zero(), "scale-to-zero-pod-retention-period",
          d(c.scale_to_zero_pod_retention_period), "must be non-negative");
  require(c.target_burst_capacity >= 0 || c.target_burst_capacity == -1, "target-burst-capacity",
          n(c.target_burst_capacity), "must be non-negative, or -1 for unlimited");
  require(c.container_concurrency_target_fraction > 0 && c.container_concurrency_target_fraction <= 1,
          "container-concurrency-target-percentage", n(c.container_concurrency_target_fraction * 100),
          "must be a percentage in (0, 100]");
  if (const auto& tu = c.target_utilization_percentage) {
    require(*tu >= 1 && *tu <= 100, "target-utilization-percentage", n(*tu),
            "must be a percentage in [1, 100]");
  }
  require(c.container_concurrency_target_fraction * c.container_concurrency_target_default >= kTargetMin,
          "container-concurrency-target-default", n(c.container_concurrency_target_default),
          "times the target utilization must be at least 0.01");
  require(c.rps_target_default >= kTargetMin, "requests-per-second-target-default", n(c.rps_target_default),
          "must be at least 0.01");
  require(c.activator_capacity >= 1, "activator-capacity", n(c.activator_capacity), "must be at least 1");
  require(c.max_scale_up_rate > 1, "max-scale-up-rate", n(c.max_scale_up_rate), "must be greater than 1");
  require(c.max_scale_down_rate > 1, "max-scale-down-rate", n(c.max_scale_down_rate),
          "must be greater than 1");
  require(c.stable_window >= kWindowMin && c.stable_window <= kWindowMax &&
              c.stable_window % 1s == Duration::zero(),
          "stable-window", d(c.stable_window), "must be whole seconds in [6s, 1h]");
  require(c.panic_window_percentage >= 1 && c.panic_window_percentage <= 100, "panic-window-percentage",
          n(c.panic_window_percentage), "must be in [1, 100]");
  require(c.initial_scale >= (c.allow_zero_initial_scale ? 0 : 1), "initial-scale", i(c.initial_scale),
          c.allow_zero_initial_scale ? "must be at least 0"
                                     : "must be at least 1 (0 needs allow-zero-initial-scale: true)");
  require(c.min_scale >= 0, "min-scale", i(c.min_scale), "must be at least 0");
  require(c.max_scale_limit >= 0, "max-scale-limit", i(c.max_scale_limit), "must be at least 0");
  require(c.max_scale >= (c.max_scale_limit > 0 ? 1 : 0) &&
              (c.max_scale_limit == 0 || c.max_scale <= c.max_scale_limit),
          "max-scale", i(c.max_scale),
          c.max_scale_limit > 0 ? "must be in [1, max-scale-limit]" : "must be at least 0 (0 = unbounded)");
  require(c.max_scale == 0 || c.min_scale <= c.max_scale, "min-scale", i(c.min_scale),
          "must not exceed max-scale (" + i(c.max_scale) + ")");
  require(c.target == 0 || c.target >= kTargetMin, "target", n(c.target), "must be at least 0.01 (or unset)");
  require(c.container_concurrency >= 0 && c.container_concurrency <= kContainerConcurrencyMax,
          "container-concurrency", i(c.container_concurrency),
          "must be in [0, 1000] (0 = unlimited; 1000 is Knative's container-concurrency-max-limit)");
  require(c.activation_scale == 0 || c.activation_scale >= 2, "activation-scale", i(c.activation_scale),
          "must be at least 2 (or unset)");
  require(c.activation_scale == 0 || c.activation_scale >= c.min_scale, "activation-scale",
          i(c.activation_scale), "must not be below min-scale (" + i(c.min_scale) + ")");
  require(c.activation_scale == 0 || c.max_scale == 0 || c.activation_scale <= c.max_scale,
          "activation-scale", i(c.activation_scale), "must not exceed max-scale (" + i(c.max_scale) + ")");
  require(c.bucket_size > Duration::zero() && c.stable_window % c.bucket_size == Duration::zero(),
          "bucket size", d(c.bucket_size), "must be positive and divide the stable window");
  require(c.tick_interval > Duration::zero(), "tick interval", d(c.tick_interval), "must be positive");
}

std::vector<std::string_view> config_keys() {
  std::vector<std::string_view> keys;
  for (const auto& [name, set] : setters()) keys.push_back(name);
  return keys;
}

namespace {

void apply(AutoscalerConfig& config, const ConfigData& data) {
  for (const auto& [key, value] : data) {
    if (!key.empty() && key.front() == '_') continue;
    bool known = false;
    for (const auto& [name, set] : setters()) {
      if (name == key) {
        set(config, name, value);
        known = true;
        break;
      }
    }
    if (!known) {
      std::string allowed;
      for (const auto& [name, set] : setters()) {
        if (!allowed.empty()) allowed += ", ";
        allowed += name;
      }
      throw ConfigError("unknown autoscaler key '" + key + "' (allowed: " + allowed + ")");
    }
  }
}

// pkg/apis/autoscaling/annotation_validation.go: what a revision's annotations must satisfy beyond the
// ConfigMap's ranges.
void validate_revision_keys(const ConfigData& revision, const AutoscalerConfig& c) {
  const auto d = [](Duration v) { return format_duration(v); };
  if (revision.contains("panic-threshold-percentage")) {
    require(c.panic_threshold_percentage >= 110 && c.panic_threshold_percentage <= 1000,
            "panic-threshold-percentage", number_text(c.panic_threshold_percentage), "must be in [110, 1000]");
  }
  if (revision.contains("scale-down-delay")) {
    require(c.scale_down_delay <= kWindowMax, "scale-down-delay", d(c.scale_down_delay), "must be in [0s, 1h]");
  }
  if (revision.contains("scale-to-zero-pod-retention-period")) {
    require(c.scale_to_zero_pod_retention_period <= kWindowMax, "scale-to-zero-pod-retention-period",
            d(c.scale_to_zero_pod_retention_period), "must be in [0s, 1h]");
  }
}

}  // namespace

AutoscalerConfig config_from_data(const ConfigData& cluster, const ConfigData& revision) {
  AutoscalerConfig config;
  apply(config, cluster);
  apply(config, revision);
  validate(config);
  validate_revision_keys(revision, config);
  return config;
}

AutoscalerConfig config_from_data(const ConfigData& cluster) { return config_from_data(cluster, {}); }

Duration panic_window(const AutoscalerConfig& config) {
  const auto secs = std::chrono::duration<double>(config.stable_window).count() *
                    config.panic_window_percentage / 100.0;
  const Duration rounded = std::chrono::seconds(std::llround(secs));
  return rounded < config.bucket_size ? config.bucket_size : rounded;
}

}  // namespace sluice::autoscaler
