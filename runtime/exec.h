// Running a command to completion with its output captured and a deadline: the mechanics under Exec
// (into a container) and the OCI runtime's CLI calls.
#pragma once

#include <chrono>
#include <cstddef>

#include "runtime/instance.h"
#include "runtime/spawn.h"

namespace sluice::runtime {

// Spawns `req` with stdout and stderr on one capture pipe (its own fds are replaced), keeps the first
// `max_output` bytes, and SIGKILLs the process group at `timeout`.
ExecResult run_captured(SpawnRequest req, std::chrono::milliseconds timeout, std::size_t max_output = 1 << 20);

}  // namespace sluice::runtime
