// Running a command to completion with its output captured and a deadline: the mechanics under Exec
// (into a container) and the OCI runtime's CLI calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "runtime/instance.h"
#include "runtime/spawn.h"

namespace sluice::runtime {

// Spawns `req` with stdout and stderr on one capture pipe (its own fds are replaced), keeps the first
// `max_output` bytes, and SIGKILLs the process group at `timeout`.
ExecResult run_captured(SpawnRequest req, std::chrono::milliseconds timeout, std::size_t max_output = 1 << 20);

// The same, with the output handed to `on_line` line by line as it comes (runtime/line_splitter.h: without
// the newline, a line longer than 64 KiB cut) instead of kept: a build whose progress is shown.
ExecResult run_lines(SpawnRequest req, std::chrono::milliseconds timeout,
                     const std::function<void(std::string_view)>& on_line);

// Runs a helper command (`runc kill`, `podman save`) with this process's environment to completion, for
// kHelperTimeout at most; returns its exit code (-1 if it could not run, was killed or timed out) and its
// combined output (or why it could not run).
inline constexpr std::chrono::minutes kHelperTimeout{10};
int run_helper(const std::vector<std::string>& argv, std::string& output);

}  // namespace sluice::runtime
