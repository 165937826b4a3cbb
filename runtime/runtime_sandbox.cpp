// Runtime: PodSandboxes (CRI's RunPodSandbox, StopPodSandbox, RemovePodSandbox, status, list), Exec, and
// the user checks containers get at start.
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <thread>

#include "runtime/netlink.h"
#include "runtime/runtime.h"
#include "runtime/sandbox_record.h"

namespace sluice::runtime {

namespace {

bool valid_sandbox_id(const std::string& id) {
  if (id.empty() || id == "." || id == "..") return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

// Can this process make a network namespace and talk rtnetlink in it? Tried in a throwaway thread.
std::optional<std::string> probe_netns() {
  std::optional<std::string> why;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      why = std::string("cannot create a network namespace (unshare: ") + std::strerror(errno) + ")";
      return;
    }
    netlink::Socket s;
    if (!s.ok()) why = s.error();
    else if (!s.set_up("lo")) why = "cannot configure a network namespace: " + s.error();
  });
  t.join();
  return why;
}

}  // namespace

std::string_view to_string(SandboxState s) { return s == SandboxState::ready ? "ready" : "not-ready"; }

std::optional<std::string> Runtime::sandbox_unavailable_reason() {
  std::lock_guard lock(sandbox_probe_mu_);
  if (sandbox_verdict_) return *sandbox_verdict_;
  std::optional<std::string> why;
  auto range = parse_cidr(opts_.sandbox_network);
  if (!range) why = "sandbox network '" + opts_.sandbox_network + "' is not an IPv4 range such as 169.254.64.0/18";
  if (!why) why = probe_netns();
  if (!why) {
    std::error_code ec;
    std::filesystem::create_directories(opts_.sandbox_state_dir, ec);
    if (ec) why = "cannot create " + opts_.sandbox_state_dir.string() + ": " + ec.message();
  }
  sandbox_verdict_ = why;
  return why;
}

std::shared_ptr<Runtime::Sandbox> Runtime::find_sandbox(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

PodSandboxStatus Runtime::sandbox_snapshot(const Sandbox& sb) const {
  PodSandboxStatus st;
  st.id = sb.config.id;
  st.handler = sb.handler;
  st.state = sb.state;
  if (sb.net.netns_fd >= 0) {
    st.address = ipv4_text(sb.net.pod_address);
    st.host_address = ipv4_text(sb.net.host_address);
    st.host_link = sb.net.host_link;
  }
  st.netns_inode = sb.netns_inode;
  st.created_at = sb.created_at;
  st.containers.assign(sb.containers.begin(), sb.containers.end());
  st.limits = sb.config.limits;
  if (sb.cgroup) {
    st.memory_limit_file = sb.cgroup->memory_limit_file();
    st.cpu_limit_file = sb.cgroup->cpu_limit_file();
    st.cgroup_dirs = sb.cgroup->dirs();
  }
  return st;
}

Outcome Runtime::run_pod_sandbox(const PodSandboxConfig& config, const std::string& handler) {
  if (!valid_sandbox_id(config.id)) return Outcome::failure("sandbox id '" + config.id + "' is not [A-Za-z0-9._-]+");
  if (auto h = check_handler(handler); !h) return h;
  if (auto why = sandbox_unavailable_reason()) return Outcome::failure("sandboxes are unavailable: " + *why);
  auto sb = std::make_shared<Sandbox>();
  sb->config = config;
  sb->handler = handler;
  sb->state = SandboxState::not_ready;  // until set up: no container may be created in it
  sb->created_at = Clock::now();
  {
    std::lock_guard lock(mu_);
    if (!sandboxes_.emplace(config.id, sb).second) return Outcome::failure("sandbox '" + config.id + "' exists");
  }
  std::lock_guard op(sb->op_mu);
  auto fail = [&](const std::string& why) {
    if (sb->net.netns_fd >= 0) destroy_pod_network(sb->net);
    sb->cgroup.reset();  // removes its dirs
    sb->lease.reset();
    std::lock_guard lock(mu_);
    sandboxes_.erase(config.id);
    return Outcome::failure("sandbox '" + config.id + "': " + why);
  };
  auto [range, prefix] = *parse_cidr(opts_.sandbox_network);
  std::string error;
  sb->lease = SandboxLease::acquire(opts_.sandbox_state_dir, pod_slots(prefix), config.id, error);
  if (!sb->lease) return fail(error);
  if (!throttle_.base.empty()) sb->lease->record("base", throttle_.base.string());
  auto record = [&](const char* kind, const std::string& value) { sb->lease->record(kind, value); };
  sb->cgroup = PodCgroup::create(throttle_, opts_.cgroup_name, config.id, config.limits, record, error);
  if (!sb->cgroup) return fail(error);
  sb->lease->record("link", host_link_name(sb->lease->slot()));
  if (!create_pod_network(sb->lease->slot(), range, sb->net, error)) return fail(error);
  struct stat ns {};
  if (::fstat(sb->net.netns_fd, &ns) == 0) sb->netns_inode = ns.st_ino;
  sb->context = SandboxContext{config.id,
                               sb->net.netns_fd,
                               sb->net.ipcns_fd,
                               sb->cgroup->container_parent(),
                               sb->cgroup->join_files(),
                               sb->cgroup->container_limits(),
                               config.limits};
  std::lock_guard lock(mu_);
  sb->state = SandboxState::ready;
  return {};
}

Outcome Runtime::stop_pod_sandbox(const std::string& id) {
  auto sb = find_sandbox(id);
  if (!sb) return Outcome::failure("no sandbox '" + id + "'");
  std::vector<std::string> containers;
  {
    std::lock_guard lock(mu_);
    sb->state = SandboxState::not_ready;  // no new containers from here on
    containers.assign(sb->containers.begin(), sb->containers.end());
  }
  for (const auto& c : containers) {
    auto st = status(c);
    if (st && st->state == InstanceState::running) {
      if (auto ok = stop(c, std::chrono::milliseconds(0)); !ok) return ok;
    }
  }
  std::lock_guard op(sb->op_mu);
  if (sb->net.netns_fd >= 0) {
    // Containers that were created but never started still hold the context's fd number: they can no
    // longer start (the sandbox is not ready), so the namespace may go.
    destroy_pod_network(sb->net);
    sb->context.netns_fd = -1;
    sb->context.ipcns_fd = -1;
  }
  return {};
}

Outcome Runtime::remove_pod_sandbox(const std::string& id) {
  auto sb = find_sandbox(id);
  if (!sb) return Outcome::failure("no sandbox '" + id + "'");
  std::vector<std::string> containers;
  {
    std::lock_guard lock(mu_);
    sb->state = SandboxState::not_ready;
    containers.assign(sb->containers.begin(), sb->containers.end());
  }
  for (const auto& c : containers)
    if (auto ok = remove(c); !ok && find(c)) return ok;
  std::lock_guard op(sb->op_mu);
  if (sb->net.netns_fd >= 0) destroy_pod_network(sb->net);
  std::string error;
  if (sb->cgroup && !sb->cgroup->remove(error))
    return Outcome::failure("sandbox '" + id + "': cgroups not removed: " + error);
  sb->cgroup.reset();
  sb->lease.reset();
  std::lock_guard lock(mu_);
  sandboxes_.erase(id);
  return {};
}

std::optional<PodSandboxStatus> Runtime::pod_sandbox_status(const std::string& id) const {
  auto sb = find_sandbox(id);
  if (!sb) return std::nullopt;
  std::lock_guard op(sb->op_mu);  // its network and cgroups change only under op_mu
  std::uint64_t ooms = sb->cgroup ? sb->cgroup->oom_kills() : 0;
  std::lock_guard lock(mu_);
  auto st = sandbox_snapshot(*sb);
  st.oom_kills = ooms;
  return st;
}

std::vector<PodSandboxStatus> Runtime::list_pod_sandbox() const {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, sb] : sandboxes_) ids.push_back(id);
  }
  std::vector<PodSandboxStatus> out;
  for (const auto& id : ids)
    if (auto st = pod_sandbox_status(id)) out.push_back(std::move(*st));
  return out;
}

Outcome Runtime::check_start_user(const InstanceSpec& spec) const {
  if (!spec.run_as_non_root) return {};
  // Who the app would be: the configured user, else the runtime's own (process) or the image's root (OCI).
  long uid = spec.run_as_user ? *spec.run_as_user : spec.handler == "process" ? static_cast<long>(::geteuid()) : 0;
  if (uid != 0) return {};
  return Outcome::failure(
      "runAsNonRoot is set but the instance would run as root (uid 0): set run-as-user to a non-zero uid");
}

ExecResult Runtime::exec(const std::string& id, const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout) {
  ExecResult result;
  auto rec = find(id);
  if (!rec) {
    result.error = "no instance '" + id + "'";
    return result;
  }
  if (argv.empty()) {
    result.error = "exec into '" + id + "': empty command";
    return result;
  }
  // Held for the whole command, so the task cannot be removed under it: a stop waits for a preStop hook,
  // as kubelet's does.
  std::lock_guard op(rec->op_mu);
  auto st = status(id);
  if (!rec->task || !st || st->state != InstanceState::running) {
    result.error = "instance '" + id + "' is not running";
    return result;
  }
  if (st->frozen) {  // a command in a frozen cgroup would never run
    std::string error;
    if (!rec->task->thaw(error)) {
      result.error = "thaw '" + id + "' for exec: " + error;
      return result;
    }
    InstanceStatus snapshot;
    {
      std::lock_guard lock(mu_);
      rec->status.frozen = false;
      snapshot = rec->status;
    }
    emit(EventKind::thawed, snapshot);
  }
  return rec->task->exec(argv, timeout);
}

}  // namespace sluice::runtime
