// Runtime: instance records, lifecycle transitions and events; handlers do the starting and signalling.
#include "runtime/runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

#include "common/config_error.h"
#include "runtime/oci_handler.h"
#include "runtime/process_handler.h"
#include "runtime/reactor.h"
#include "runtime/sandbox_record.h"

extern char** environ;

namespace sluice::runtime {

namespace fs = std::filesystem;


namespace {

bool valid_id(const std::string& id) {
  if (id.empty() || id == "." || id == ".." || id == "probe") return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

Outcome no_such(const std::string& id) { return Outcome::failure("no instance '" + id + "'"); }

}  // namespace

Runtime::Runtime(RuntimeOptions opts) : opts_(std::move(opts)) {
  std::string pid = std::to_string(::getpid());
  if (opts_.state_dir.empty()) opts_.state_dir = fs::temp_directory_path() / ("sluice-" + pid);
  if (opts_.log_dir.empty()) opts_.log_dir = opts_.state_dir / "logs";
  if (opts_.cgroup_name.empty()) opts_.cgroup_name = "sluice-" + pid;
  std::optional<ThrottleKind> forced;
  if (opts_.throttle != "auto") {
    forced = parse_throttle(opts_.throttle);
    if (!forced)
      throw ConfigError("throttle '" + opts_.throttle +
                        "' is unknown; allowed: auto, cgroup2-freeze, cgroup2-cpu-max, cgroup1-freezer, "
                        "cgroup1-cfs-quota, sigstop, none");
  }
  throttle_ = choose_throttle(forced, opts_.cgroup_name);
  std::error_code ec;
  fs::create_directories(opts_.state_dir, ec);
  fs::create_directories(opts_.log_dir, ec);
  handlers_.emplace("process", std::make_unique<ProcessHandler>(throttle_));
  for (const char* oci : {"runc", "crun"})
    handlers_.emplace(oci, std::make_unique<OciHandler>(oci, opts_.state_dir / ("." + std::string(oci))));
  reactor_ = std::make_unique<Reactor>();
  // What a killed runtime (kill -9) left: its pods' links and cgroups, recorded in their slot files.
  if (fs::exists(opts_.sandbox_state_dir, ec)) sweep_stale_leases(opts_.sandbox_state_dir);
}

Runtime::~Runtime() {
  for (const auto& st : list()) (void)remove(st.id);
  for (const auto& sb : list_pod_sandbox()) (void)remove_pod_sandbox(sb.id);
  release_sandbox_bases(opts_.cgroup_name);
  reactor_.reset();
  handlers_.clear();
  release_throttle(throttle_);
  std::error_code ec;
  fs::remove_all(opts_.state_dir, ec);
}

Handler* Runtime::handler(const std::string& name) {
  auto it = handlers_.find(name);
  return it == handlers_.end() ? nullptr : it->second.get();
}

Outcome Runtime::check_handler(const std::string& name) {
  std::lock_guard lock(handlers_mu_);
  auto* h = handler(name);
  if (!h) return Outcome::failure("unknown handler '" + name + "' (known: process, runc, crun)");
  if (auto why = h->unavailable_reason()) return Outcome::failure("handler '" + name + "' is unavailable: " + *why);
  return {};
}

std::shared_ptr<Runtime::Record> Runtime::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = instances_.find(id);
  return it == instances_.end() ? nullptr : it->second;
}

void Runtime::emit(EventKind kind, const InstanceStatus& status) {
  if (opts_.on_event) opts_.on_event(Event{kind, status});
}

Outcome Runtime::create(const InstanceSpec& spec) {
  if (!valid_id(spec.id)) return Outcome::failure("instance id '" + spec.id + "' is not [A-Za-z0-9._-]+");
  if (spec.command.empty()) return Outcome::failure("instance '" + spec.id + "' has no command");
  if (auto h = check_handler(spec.handler); !h) return h;
  auto rec = std::make_shared<Record>();
  if (!spec.sandbox.empty()) {
    rec->sandbox = find_sandbox(spec.sandbox);
    if (!rec->sandbox) return Outcome::failure("no sandbox '" + spec.sandbox + "'");
    if (rec->sandbox->handler != spec.handler)
      return Outcome::failure("instance '" + spec.id + "' asks for handler '" + spec.handler + "' but sandbox '" +
                              spec.sandbox + "' runs '" + rec->sandbox->handler + "'");
    rec->status.sandbox = spec.sandbox;
    rec->status.memory_limit_bytes = rec->sandbox->config.limits.memory_bytes;
  }
  rec->spec = spec;
  rec->status.id = spec.id;
  rec->status.handler = spec.handler;
  rec->status.created_at = Clock::now();
  rec->status.log_file = opts_.log_dir / (spec.id + ".log");
  rec->status.tmp_dir = opts_.state_dir / spec.id / "tmp";
  InstanceStatus snapshot;
  {
    std::lock_guard lock(mu_);
    if (rec->sandbox && rec->sandbox->state != SandboxState::ready)
      return Outcome::failure("sandbox '" + spec.sandbox + "' is not ready");
    if (!instances_.emplace(spec.id, rec).second) return Outcome::failure("instance '" + spec.id + "' exists");
    if (rec->sandbox) rec->sandbox->containers.insert(spec.id);
    snapshot = rec->status;
  }
  emit(EventKind::created, snapshot);
  return {};
}

std::vector<std::string> Runtime::contract_env(const InstanceSpec& spec, const fs::path& tmp) const {
  std::map<std::string, std::string> env;
  if (spec.inherit_env && spec.handler == "process") {
    for (char** e = environ; *e; ++e) {
      std::string_view kv(*e);
      auto eq = kv.find('=');
      if (eq != std::string_view::npos) env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
    }
  }
  if (spec.handler != "process") env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& [k, v] : spec.env) env[k] = v;
  // The contract wins over anything inherited or configured: the platform sets these.
  env["PORT"] = std::to_string(spec.port);
  env["K_SERVICE"] = spec.service.empty() ? spec.id : spec.service;
  env["K_REVISION"] = spec.revision.empty() ? env["K_SERVICE"] + "-00001" : spec.revision;
  env["K_CONFIGURATION"] = spec.configuration.empty() ? env["K_SERVICE"] : spec.configuration;
  env["TMPDIR"] = spec.handler == "process" ? tmp.string() : "/tmp";
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

Outcome Runtime::start(const std::string& id) {
  auto rec = find(id);
  if (!rec) return no_such(id);
  std::lock_guard op(rec->op_mu);
  if (rec->task) return Outcome::failure("instance '" + id + "' was already started");
  if (auto user = check_start_user(rec->spec); !user) {
    std::lock_guard lock(mu_);
    rec->status.reason = user.error();
    return Outcome::failure("start '" + id + "': " + user.error());
  }
  std::error_code ec;
  fs::create_directories(rec->status.tmp_dir, ec);
  if (ec) return Outcome::failure("create " + rec->status.tmp_dir.string() + ": " + ec.message());
  if (rec->spec.run_as_user || rec->spec.run_as_group) {  // TMPDIR is the app's to write
    int uid = rec->spec.run_as_user.value_or(-1), gid = rec->spec.run_as_group.value_or(-1);
    if (::chown(rec->status.tmp_dir.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0)
      return Outcome::failure("chown " + rec->status.tmp_dir.string() + ": " + std::strerror(errno));
  }
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Outcome::failure(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Outcome::failure(std::string("pipe: ") + std::strerror(errno));
  }
  if (rec->log_fd < 0)  // a start that failed before leaves it open for the retry
    rec->log_fd = ::open(rec->status.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  StartRequest req{rec->spec, contract_env(rec->spec, rec->status.tmp_dir), opts_.state_dir / id, out[1], err[1],
                   rec->sandbox ? &rec->sandbox->context : nullptr};
  if (rec->sandbox && rec->sandbox->cgroup) rec->oom_baseline = rec->sandbox->cgroup->oom_kills();
  std::string error;
  Handler* h;
  {
    std::lock_guard lock(handlers_mu_);
    h = handler(rec->spec.handler);
  }
  auto task = h->start(req, error);
  ::close(out[1]);
  ::close(err[1]);
  if (!task) {
    ::close(out[0]);
    ::close(err[0]);
    std::lock_guard lock(mu_);
    rec->status.reason = error;
    return Outcome::failure("start '" + id + "': " + error);
  }
  InstanceStatus snapshot;
  {
    std::lock_guard lock(mu_);
    rec->status.state = InstanceState::running;
    rec->status.pid = task->pid();
    rec->status.started_at = Clock::now();
    snapshot = rec->status;
  }
  emit(EventKind::started, snapshot);
  std::weak_ptr<Record> weak = rec;
  WatchCallbacks cb;
  cb.on_line = [this, weak, id](Stream s, std::string_view line) {
    auto r = weak.lock();
    if (!r) return;
    if (r->log_fd >= 0) {
      std::string copy(line);
      copy += '\n';
      ssize_t ignored = ::write(r->log_fd, copy.data(), copy.size());
      (void)ignored;
    }
    if (opts_.on_output) opts_.on_output(id, s, line);
  };
  cb.on_exit = [this, weak](int code, int sig) {
    if (auto r = weak.lock()) on_exit(r, code, sig);
  };
  int pidfd = task->pidfd();
  rec->task = std::move(task);
  reactor_->run_sync([&] {
    rec->watch = Watch::open(*reactor_, out[0], err[0], pidfd, std::move(cb));
    rec->watch->start();
  });
  return {};
}

void Runtime::on_exit(const std::shared_ptr<Record>& rec, int code, int sig) {
  InstanceStatus snapshot;
  // The kernel's OOM killer sends SIGKILL and counts it in the pod's memory cgroup: that is OOMKilled.
  bool oom = sig == SIGKILL && rec->sandbox && rec->sandbox->cgroup &&
             rec->sandbox->cgroup->oom_kills() > rec->oom_baseline;
  {
    std::lock_guard lock(mu_);
    rec->status.state = InstanceState::exited;
    rec->status.exit_code = code;
    rec->status.signal = sig;
    rec->status.frozen = false;
    rec->status.finished_at = Clock::now();
    rec->status.reason = oom ? "OOMKilled" : sig != 0 ? "Signaled" : code == 0 ? "Completed" : "Error";
    snapshot = rec->status;
  }
  exited_cv_.notify_all();
  emit(EventKind::exited, snapshot);
}

bool Runtime::wait_state(Record& rec, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return exited_cv_.wait_for(lock, timeout, [&] { return rec.status.state == InstanceState::exited; });
}

std::optional<InstanceStatus> Runtime::wait_exited(const std::string& id, std::chrono::milliseconds timeout) {
  auto rec = find(id);
  if (!rec || !wait_state(*rec, timeout)) return std::nullopt;
  std::lock_guard lock(mu_);
  return rec->status;
}

Outcome Runtime::stop(const std::string& id, std::optional<std::chrono::milliseconds> grace) {
  auto rec = find(id);
  if (!rec) return no_such(id);
  std::lock_guard op(rec->op_mu);
  if (!rec->task) return Outcome::failure("instance '" + id + "' was never started");
  InstanceStatus snapshot;
  {
    std::lock_guard lock(mu_);
    snapshot = rec->status;
  }
  if (snapshot.state == InstanceState::running) {
    // A v1-frozen task cannot act on SIGTERM (nor die of SIGKILL): thaw first, always.
    std::string ignored;
    rec->task->thaw(ignored);
    {
      std::lock_guard lock(mu_);
      rec->status.frozen = false;
      snapshot = rec->status;
    }
    emit(EventKind::stopping, snapshot);
    rec->task->terminate();
    if (!wait_state(*rec, grace.value_or(opts_.default_grace))) {
      emit(EventKind::killing, snapshot);
      rec->task->kill();
      if (!wait_state(*rec, std::chrono::seconds(10)))
        return Outcome::failure("instance '" + id + "' still running 10 s after SIGKILL");
    }
  }
  rec->task->cleanup();
  return {};
}

Outcome Runtime::remove(const std::string& id) {
  auto rec = find(id);
  if (!rec) return no_such(id);
  bool started;
  {
    std::lock_guard op(rec->op_mu);
    started = rec->task != nullptr;
  }
  if (started) {
    if (auto stopped = stop(id, std::chrono::milliseconds(0)); !stopped) return stopped;
  }
  std::lock_guard op(rec->op_mu);
  if (rec->watch) reactor_->run_sync([&] { rec->watch->close(); });
  rec->watch.reset();
  if (rec->log_fd >= 0) ::close(rec->log_fd);
  rec->log_fd = -1;
  rec->task.reset();
  std::error_code ec;
  fs::remove_all(opts_.state_dir / id, ec);
  InstanceStatus snapshot;
  {
    std::lock_guard lock(mu_);
    snapshot = rec->status;
    instances_.erase(id);
    if (rec->sandbox) rec->sandbox->containers.erase(id);
  }
  emit(EventKind::removed, snapshot);
  return {};
}

Outcome Runtime::freeze(const std::string& id) {
  auto rec = find(id);
  if (!rec) return no_such(id);
  std::lock_guard op(rec->op_mu);
  if (!rec->task || status(id)->state != InstanceState::running)
    return Outcome::failure("instance '" + id + "' is not running");
  std::string error;
  if (!rec->task->freeze(error)) return Outcome::failure("freeze '" + id + "': " + error);
  InstanceStatus snapshot;
  {
    std::lock_guard lock(mu_);
    // The app may have exited meanwhile (on_exit does not wait for op_mu): an exited instance is not frozen.
    if (rec->status.state != InstanceState::running) return Outcome::failure("instance '" + id + "' exited");
    rec->status.frozen = true;
    snapshot = rec->status;
  }
  emit(EventKind::frozen, snapshot);
  return {};
}

Outcome Runtime::thaw(const std::string& id) {
  auto rec = find(id);
  if (!rec) return no_such(id);
  std::lock_guard op(rec->op_mu);
  if (!rec->task) return Outcome::failure("instance '" + id + "' is not running");
  std::string error;
  if (!rec->task->thaw(error)) return Outcome::failure("thaw '" + id + "': " + error);
  InstanceStatus snapshot;
  {
    std::lock_guard lock(mu_);
    rec->status.frozen = false;
    snapshot = rec->status;
  }
  emit(EventKind::thawed, snapshot);
  return {};
}

std::optional<InstanceStatus> Runtime::status(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = instances_.find(id);
  if (it == instances_.end()) return std::nullopt;
  return it->second->status;
}

std::vector<InstanceStatus> Runtime::list() const {
  std::lock_guard lock(mu_);
  std::vector<InstanceStatus> out;
  for (const auto& [id, rec] : instances_) out.push_back(rec->status);
  return out;
}

std::string_view to_string(InstanceState s) {
  switch (s) {
    case InstanceState::created: return "created";
    case InstanceState::running: return "running";
    case InstanceState::exited: return "exited";
  }
  return "?";
}

std::string_view to_string(EventKind k) {
  switch (k) {
    case EventKind::created: return "created";
    case EventKind::started: return "started";
    case EventKind::frozen: return "frozen";
    case EventKind::thawed: return "thawed";
    case EventKind::stopping: return "stopping";
    case EventKind::killing: return "killing";
    case EventKind::exited: return "exited";
    case EventKind::removed: return "removed";
  }
  return "?";
}

}  // namespace sluice::runtime
