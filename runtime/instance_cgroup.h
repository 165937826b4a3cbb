// One instance's cgroup: joined by the child before exec, frozen/thawed, emptied and removed at the end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/throttle.h"

namespace sluice::runtime {

class InstanceCgroup {
 public:
  // Creates <choice.base>/<id>; nullptr with `error` set when that fails.
  static std::unique_ptr<InstanceCgroup> create(const ThrottleChoice& choice, const std::string& id,
                                                std::string& error);
  ~InstanceCgroup();
  InstanceCgroup(const InstanceCgroup&) = delete;
  InstanceCgroup& operator=(const InstanceCgroup&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // An fd on cgroup.procs the forked child writes "0" to, so it is inside before exec.
  int procs_fd() const { return procs_fd_; }
  void close_procs_fd();

  // Returns once the kernel reports the cgroup frozen (or the quota is set); false with `error` otherwise.
  bool freeze(std::string& error);
  bool thaw(std::string& error);
  // SIGKILL to every process in the cgroup (thawing first: a v1-frozen task cannot even die).
  void kill_all();
  std::vector<pid_t> pids() const;
  // Kills what is left, then rmdir (retried while the exiting tasks are still counted).
  bool remove(std::string& error);

 private:
  InstanceCgroup(ThrottleKind kind, std::filesystem::path dir) : kind_(kind), dir_(std::move(dir)) {}
  bool freeze_v1(std::string& error);
  bool wait_for(const char* file, const char* needle, std::chrono::milliseconds timeout) const;

  ThrottleKind kind_;
  std::filesystem::path dir_;
  int procs_fd_ = -1;
  bool removed_ = false;
};

}  // namespace sluice::runtime
