// Finding cgroup hierarchies (v2 unified and v1 per controller) and small file operations on them.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::runtime::cgroup {

// Where a hierarchy is mounted and where this process sits in it, from /proc/self/{mountinfo,cgroup}.
struct Hierarchy {
  std::filesystem::path mount;      // e.g. /sys/fs/cgroup/freezer
  std::filesystem::path own_path;   // e.g. / or /system.slice/x.service (relative to the mount)
  std::filesystem::path own_dir() const;  // mount + own_path
};

// The cgroup2 hierarchy, if mounted.
std::optional<Hierarchy> unified();
// The v1 hierarchy carrying `controller` ("freezer", "cpu"), if mounted.
std::optional<Hierarchy> v1(std::string_view controller);

// Parsing helpers, exposed for unit tests: `mountinfo` and `proc_cgroup` are file contents.
std::optional<Hierarchy> find_unified(std::string_view mountinfo, std::string_view proc_cgroup);
std::optional<Hierarchy> find_v1(std::string_view mountinfo, std::string_view proc_cgroup,
                                 std::string_view controller);

// Every hierarchy a process is in, from its /proc/PID/cgroup text: the dir of each (mount + its path there)
// that `mountinfo` shows mounted, in the order of `proc_cgroup`'s lines. A hierarchy not mounted here is
// left out.
std::vector<std::filesystem::path> dirs_of(std::string_view mountinfo, std::string_view proc_cgroup);

// File helpers; false (with errno-derived text in `error` when given) on failure.
bool write_file(const std::filesystem::path& file, std::string_view value, std::string* error = nullptr);
std::optional<std::string> read_file(const std::filesystem::path& file);
// rmdir, retried until `timeout` while the kernel still reports the cgroup busy (tasks exiting).
bool remove_dir(const std::filesystem::path& dir, std::chrono::milliseconds timeout, std::string* error);

}  // namespace sluice::runtime::cgroup
