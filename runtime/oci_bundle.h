// OCI bundle generation: a config.json for one instance (host network, its own pid/mount/ipc/uts namespaces).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sluice::runtime {

struct BindMount {
  std::filesystem::path source;
  std::string destination;
  bool read_only = true;
};

struct OciConfig {
  std::vector<std::string> args;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string cwd = "/";
  std::filesystem::path rootfs;  // absolute
  bool rootfs_read_only = true;
  std::string hostname;
  std::vector<BindMount> binds;  // after the standard /proc, /dev, /sys, /tmp mounts
  bool dns_files = true;         // bind the host's /etc/resolv.conf and /etc/hosts read-only
  int uid = 0, gid = 0;          // process.user
  std::string netns_path;        // join this network namespace (a pod's); empty: the host's network
  std::string ipcns_path;        // join this IPC namespace (a pod's); empty: one of its own
  std::optional<std::uint64_t> memory_limit_bytes;  // linux.resources; also caps the /tmp tmpfs
  std::optional<std::uint32_t> cpu_millis;
};

// The config.json text (OCI runtime spec 1.0.2).
std::string oci_config_json(const OciConfig& cfg);

// Writes <bundle>/config.json; false with `error` set on failure.
bool write_bundle(const std::filesystem::path& bundle, const OciConfig& cfg, std::string& error);

}  // namespace sluice::runtime
