// A pod's cgroups: one dir in the throttle's hierarchy (parent of its containers' cgroups, frozen as a
// whole) and, where memory or CPU are limited in another hierarchy (cgroup v1, or a hybrid machine), a dir
// there that containers join before exec. Limits are the pod's: memory.max / memory.limit_in_bytes and
// cpu.max / cpu.cfs_quota_us.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/throttle.h"

namespace sluice::runtime {

struct PodLimits {
  std::optional<std::uint64_t> memory_bytes;
  std::optional<std::uint32_t> cpu_millis;  // 1000 = one CPU, as Kubernetes' "1000m"
};

class PodCgroup {
 public:
  // `group_name` is the runtime's own cgroup name (sluice-<pid>); `record` is told every dir before it is
  // made ("cgroup DIR" or "base DIR") so a crash can be cleaned up. nullptr with `error` on failure.
  static std::unique_ptr<PodCgroup> create(const ThrottleChoice& throttle, const std::string& group_name,
                                           const std::string& pod, const PodLimits& limits,
                                           const std::function<void(const char*, const std::string&)>& record,
                                           std::string& error);
  ~PodCgroup();
  PodCgroup(const PodCgroup&) = delete;
  PodCgroup& operator=(const PodCgroup&) = delete;

  // Parent for the containers' throttle cgroups; empty when the throttle uses no cgroup.
  const std::filesystem::path& container_parent() const { return throttle_dir_; }
  // Files (v1 `tasks`) a container's process writes "0" to, to join the pod's dirs in other hierarchies.
  const std::vector<std::filesystem::path>& join_files() const { return join_files_; }
  // Where the limits are, for status and the runtime contract ("memory.max" or "memory.limit_in_bytes").
  std::filesystem::path memory_limit_file() const;
  std::filesystem::path cpu_limit_file() const;
  const std::vector<std::filesystem::path>& dirs() const { return dirs_; }
  // Files to write in each container's own cgroup (cgroup v2), so that an app reading its own cgroup's
  // memory.max sees the pod's limit, as in a Kubernetes container. Empty on v1 (containers sit in the pod's
  // memory cgroup itself there).
  const std::vector<std::pair<std::string, std::string>>& container_limits() const { return container_limits_; }
  // OOM kills in the pod so far (memory.events / memory.oom_control "oom_kill").
  std::uint64_t oom_kills() const;
  // Thaws the whole pod (v2 cgroup.freeze or v1 freezer.state of the pod dir): a v1-frozen task cannot die.
  // Freezing is per container (its cgroup sits in the pod's), which for a one-container pod is the pod.
  bool thaw(std::string& error);
  // Kills what is left and removes every dir; true when all went.
  bool remove(std::string& error);

 private:
  PodCgroup() = default;
  ThrottleKind kind_ = ThrottleKind::none;
  std::filesystem::path throttle_dir_;
  std::filesystem::path memory_dir_, cpu_dir_;  // may equal throttle_dir_
  bool memory_v2_ = false, cpu_v2_ = false;
  std::vector<std::filesystem::path> join_files_;
  std::vector<std::pair<std::string, std::string>> container_limits_;
  std::vector<std::filesystem::path> dirs_;  // created, in creation order
  bool removed_ = false;
};

// Removes the runtime's own dirs in the v1 memory and cpu hierarchies (made for pods) once they are empty.
void release_sandbox_bases(const std::string& group_name);

}  // namespace sluice::runtime
