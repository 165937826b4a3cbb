// CPU throttle mechanisms between requests, and choosing the best one this machine offers.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::runtime {

// Best first, in SPEC §8's order. Freezers stop the instance outright; quotas leave it a trickle
// (1 ms of CPU per second) and exist for kernels or delegations without a freezer.
enum class ThrottleKind { cgroup2_freeze, cgroup2_cpu_max, cgroup1_freezer, cgroup1_cfs_quota, sigstop, none };

std::string_view to_string(ThrottleKind k);  // "cgroup2-freeze", "cgroup1-freezer", "sigstop", ...
// Accepts the to_string() names; nullopt otherwise ("auto" is the caller's business).
std::optional<ThrottleKind> parse_throttle(std::string_view name);
bool uses_cgroup(ThrottleKind k);
bool is_cgroup2(ThrottleKind k);

struct ThrottleChoice {
  ThrottleKind kind = ThrottleKind::sigstop;
  std::filesystem::path base;  // cgroup kinds: the runtime's own cgroup, parent of the instances'
  std::string detail;          // what was tried and why the better ones were passed over
};

// With `forced`, checks that mechanism and throws ConfigError with the reason if it is unusable;
// otherwise picks the best usable one. Cgroup kinds create `base` = <own cgroup>/<group_name>.
ThrottleChoice choose_throttle(std::optional<ThrottleKind> forced, const std::string& group_name);
// Removes `base` (instances' cgroups must be gone already).
void release_throttle(const ThrottleChoice& choice);

}  // namespace sluice::runtime
