// config.json text built by hand: a fixed shape, so a JSON library would add a dependency and no safety.
#include "runtime/oci_bundle.h"

#include <fstream>
#include <system_error>

#include "common/log.h"

namespace sluice::runtime {
namespace {

std::string str(std::string_view s) {
  std::string out;
  log::append_json_string(out, s);
  return out;
}

std::string array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + str(items[i]);
  return out + "]";
}

std::string mount(std::string_view dest, std::string_view type, std::string_view source,
                  const std::vector<std::string>& options) {
  return "{\"destination\":" + str(dest) + ",\"type\":" + str(type) + ",\"source\":" + str(source) +
         ",\"options\":" + array(options) + "}";
}

// The capability set container engines grant by default: enough for ordinary servers, no admin powers.
const std::vector<std::string> kCapabilities = {
    "CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",      "CAP_MKNOD",
    "CAP_NET_RAW", "CAP_SETGID",      "CAP_SETUID",           "CAP_SETFCAP",     "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"};

}  // namespace

std::string oci_config_json(const OciConfig& cfg) {
  std::vector<std::string> mounts = {
      mount("/proc", "proc", "proc", {}),
      mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      mount("/dev/pts", "devpts", "devpts",
            {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}),
      mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}),
      mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}),
      // The contract's private temp storage; in a memory cgroup tmpfs pages count against the instance.
      mount("/tmp", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=1777"}),
  };
  if (cfg.memory_limit_bytes)  // the pages count against the memory limit anyway; the size makes it visible
    mounts.back() = mount("/tmp", "tmpfs", "tmpfs",
                          {"nosuid", "nodev", "mode=1777", "size=" + std::to_string(*cfg.memory_limit_bytes)});
  auto bind = [&](const BindMount& b) {
    std::vector<std::string> opts = {"rbind", "nosuid", "nodev"};
    if (b.read_only) opts.push_back("ro");
    mounts.push_back(mount(b.destination, "bind", b.source.string(), opts));
  };
  if (cfg.dns_files) {
    bind(BindMount{"/etc/resolv.conf", "/etc/resolv.conf", true});
    bind(BindMount{"/etc/hosts", "/etc/hosts", true});
  }
  for (const auto& b : cfg.binds) bind(b);
  std::string mounts_json = "[";
  for (size_t i = 0; i < mounts.size(); ++i) mounts_json += (i ? "," : "") + mounts[i];
  mounts_json += "]";
  auto caps = array(kCapabilities);
  // No rlimits: the instance inherits the runtime's (raising them would fail where sluice's are capped).
  // Without a pod's namespace the instance shares the host's network like a process-handler instance.
  std::string ipc = cfg.ipcns_path.empty() ? "{\"type\":\"ipc\"}" : "{\"type\":\"ipc\",\"path\":" + str(cfg.ipcns_path) + "}";
  std::string namespaces = "[{\"type\":\"pid\"}," + ipc + ",{\"type\":\"uts\"},{\"type\":\"mount\"}";
  if (!cfg.netns_path.empty()) namespaces += ",{\"type\":\"network\",\"path\":" + str(cfg.netns_path) + "}";
  namespaces += "]";
  std::string resources;
  if (cfg.memory_limit_bytes || cfg.cpu_millis) {
    resources = ",\"resources\":{";
    if (cfg.memory_limit_bytes) resources += "\"memory\":{\"limit\":" + std::to_string(*cfg.memory_limit_bytes) + "}";
    if (cfg.cpu_millis)
      resources += std::string(cfg.memory_limit_bytes ? "," : "") + "\"cpu\":{\"quota\":" +
                   std::to_string(static_cast<std::uint64_t>(*cfg.cpu_millis) * 100) + ",\"period\":100000}";
    resources += "}";
  }
  return "{\"ociVersion\":\"1.0.2\","
         "\"process\":{\"terminal\":false,\"user\":{\"uid\":" + std::to_string(cfg.uid) + ",\"gid\":" + std::to_string(cfg.gid) + "},\"args\":" + array(cfg.args) +
         ",\"env\":" + array(cfg.env) + ",\"cwd\":" + str(cfg.cwd) +
         ",\"capabilities\":{\"bounding\":" + caps + ",\"effective\":" + caps + ",\"permitted\":" + caps +
         "},\"noNewPrivileges\":true},"
         "\"root\":{\"path\":" + str(cfg.rootfs.string()) + ",\"readonly\":" +
         (cfg.rootfs_read_only ? "true" : "false") + "},"
         "\"hostname\":" + str(cfg.hostname) + ",\"mounts\":" + mounts_json + ","
         "\"linux\":{\"namespaces\":" + namespaces + resources + ","
         "\"maskedPaths\":[\"/proc/kcore\",\"/proc/keys\",\"/proc/timer_list\",\"/sys/firmware\"],"
         "\"readonlyPaths\":[\"/proc/bus\",\"/proc/fs\",\"/proc/irq\",\"/proc/sys\",\"/proc/sysrq-trigger\"]}}";
}

bool write_bundle(const std::filesystem::path& bundle, const OciConfig& cfg, std::string& error) {
  std::error_code ec;
  std::filesystem::create_directories(bundle, ec);
  if (ec) {
    error = "create " + bundle.string() + ": " + ec.message();
    return false;
  }
  std::ofstream out(bundle / "config.json", std::ios::trunc);
  out << oci_config_json(cfg);
  out.close();
  if (!out) {
    error = "write " + (bundle / "config.json").string() + " failed";
    return false;
  }
  return true;
}

}  // namespace sluice::runtime
