// How many CPUs this process may use: the CPUs it may run on (its affinity), capped by its cgroup's CPU
// quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us) rounded down and at least one. queue-proxy
// sizes its Go runtime the same way (go.uber.org/automaxprocs), so a sidecar limited to 500m runs one
// worker, not one per host CPU.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

// The quota in CPUs (quota / period) of the cgroup this process is in, or nullopt when it has none
// ("max", -1) or it cannot be read. `mountinfo` and `proc_cgroup` are /proc/self/mountinfo and
// /proc/self/cgroup; `read` reads a file under the cgroup mount (nullopt when it cannot).
std::optional<double> cgroup_cpu_quota(std::string_view mountinfo, std::string_view proc_cgroup,
                                       const std::function<std::optional<std::string>(const std::string&)>& read);

// This process's: min(affinity CPUs, floor(quota)), at least 1.
unsigned usable_cpus();

}  // namespace sluice
