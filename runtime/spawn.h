// fork/exec of an instance process (and of the tools sluice runs): own process group, stdin at EOF unless
// given, output to pipes, optional cgroup.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace sluice::runtime {

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE", the complete environment
  std::filesystem::path working_dir;
  int stdout_fd = -1;            // write ends, dup'ed onto 1 and 2 in the child; -1: /dev/null
  int stderr_fd = -1;
  int cgroup_procs_fd = -1;      // when >= 0, the child writes "0" here before exec
  // A cgroup v2 directory fd: the child is created in it (clone3 CLONE_INTO_CGROUP), which spares the
  // ~10 ms a migration through cgroup.procs costs; cgroup_procs_fd is the fallback on older kernels.
  int cgroup_dir_fd = -1;
  int parent_death_signal = 0;   // when set, sent to the child when the thread that forked it ends
  int netns_fd = -1;             // when >= 0, the child joins this network namespace (a pod's) before exec
  int ipcns_fd = -1;             // likewise for an IPC namespace
  std::vector<int> join_procs_fds;  // further cgroup.procs files (a pod's v1 memory/cpu dirs) to write "0" to
  int uid = -1, gid = -1;        // when >= 0, the child drops supplementary groups and switches before exec
  // The child keeps no capability and can gain none: its bounding and ambient sets are cleared (which takes
  // CAP_SETPCAP in the parent) before the switch of user, and no_new_privs is set, so neither a set-user-ID
  // file nor a file capability raises it again. For a child that must hold nothing its parent held (a pod's
  // proxy in per-node mode); with a uid >= 1 its effective and permitted sets are empty too.
  bool drop_capabilities = false;
  int stdin_fd = -1;             // dup'ed onto 0; -1: /dev/null (at EOF)
  std::vector<int> inherit_fds;  // dup'ed onto 3, 4, ... in order and left open across exec
  bool own_process_group = true;  // false: stays in sluice's (a terminal's Ctrl-C reaches it too)
};

struct Spawned {
  pid_t pid = -1;     // also the process group id (with own_process_group)
  int pidfd = -1;     // for waiting without SIGCHLD; owned by the caller
  std::string error;  // set (and pid -1) when fork/exec failed, e.g. "exec foo: No such file or directory"
};

// Returns once the child has exec'ed (or failed to); never leaves a failed child unreaped.
Spawned spawn_process(const SpawnRequest& req);

// The child's side of `req` short of its parent-death signal and exec, in a process just forked: signal
// mask and dispositions, process group, cgroups, namespaces, user, then descriptors 0-2 and 3, 4, ... in
// place. Raw system calls only (the fork of a multi-threaded parent may run nothing else). `staged` has
// room for req.inherit_fds.size() descriptors; `keep` (what the caller still needs: an error pipe) is
// moved above the inherited descriptors first, the new numbers written back. 0, or the failing step's errno.
int set_up_child(const SpawnRequest& req, bool in_cgroup, int* staged, std::span<int> keep);

// argv[0] resolved against `path_var` (a PATH value) when it has no '/'; empty if not found.
std::string resolve_executable(const std::string& name, const std::string& path_var);

}  // namespace sluice::runtime
