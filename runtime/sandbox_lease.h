// Machine-wide sandbox slots: a file per slot under a state dir (default /run/sluice/sandboxes), created
// with O_EXCL so that several runtimes on one machine never share an address. Each file records its owner
// (pid and start time) and what to undo (host link, cgroup dirs); a runtime that starts removes what a dead
// owner (kill -9) left behind.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::runtime {

class SandboxLease {
 public:
  // The lowest free slot below `slots`; nullptr with `error` when all are taken or the dir is unusable.
  static std::unique_ptr<SandboxLease> acquire(const std::filesystem::path& dir, int slots,
                                               const std::string& sandbox, std::string& error);
  ~SandboxLease();  // the file goes: whoever held the slot has undone its work by then
  SandboxLease(const SandboxLease&) = delete;
  SandboxLease& operator=(const SandboxLease&) = delete;

  int slot() const { return slot_; }
  // Appends "<kind> <value>": "link NAME", "cgroup DIR" (removed with its subtree), "base DIR" (rmdir if
  // empty). Written before the thing is made, so a crash in between leaves nothing unrecorded.
  void record(std::string_view kind, const std::string& value);

 private:
  SandboxLease(std::filesystem::path file, int slot, int fd) : file_(std::move(file)), slot_(slot), fd_(fd) {}
  std::filesystem::path file_;
  int slot_;
  int fd_;
};

// Undoes and deletes every lease in `dir` whose owner is no longer running; returns how many.
int sweep_stale_leases(const std::filesystem::path& dir);

// A process's start time (field 22 of /proc/<pid>/stat); 0 when it is gone. Pid plus start time names a
// process uniquely even after pid reuse.
unsigned long long process_start_time(pid_t pid);

}  // namespace sluice::runtime
