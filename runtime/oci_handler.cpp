// OCI tasks are driven through the runtime's own CLI (kill, pause/resume, delete): it owns the container's
// cgroups and namespaces, and signalling its foreground process would not reach the container reliably.
#include "runtime/oci_handler.h"

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <system_error>

#include "common/ascii.h"
#include "runtime/exec.h"
#include "runtime/oci_bundle.h"
#include "runtime/spawn.h"

extern char** environ;

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;


class OciTask : public Task {
 public:
  OciTask(std::string binary, fs::path root, std::string container, fs::path bundle, Spawned s)
      : binary_(std::move(binary)), root_(std::move(root)), container_(std::move(container)),
        bundle_(std::move(bundle)), pid_(s.pid), pidfd_(s.pidfd) {}
  ~OciTask() override {
    cleanup();
    ::close(pidfd_);
  }

  pid_t pid() const override { return pid_; }
  int pidfd() const override { return pidfd_; }
  void terminate() override { cli({"kill", container_, "TERM"}); }
  void kill() override {
    // --all reaches processes the app forked, not only its init (pid 1 in the container).
    if (cli({"kill", "--all", container_, "KILL"}) != 0) cli({"kill", container_, "KILL"});
  }
  bool freeze(std::string& error) override { return cli_ok({"pause", container_}, error); }
  bool thaw(std::string& error) override {
    std::string out;
    // Resuming a container that is not paused is an error for the CLI, not for us.
    if (cli({"resume", container_}, &out) == 0 || out.find("not paused") != std::string::npos) return true;
    error = std::string(trim(out, kLineSpace));
    return false;
  }
  std::string throttle_name() const override { return fs::path(binary_).filename().string() + "-pause"; }
  ExecResult exec(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) override {
    SpawnRequest sr;
    sr.argv = {binary_, "--root", root_.string(), "exec", container_};
    sr.argv.insert(sr.argv.end(), argv.begin(), argv.end());
    for (char** e = environ; *e; ++e) sr.env.emplace_back(*e);
    return run_captured(sr, timeout);
  }
  void cleanup() override {
    if (cleaned_) return;
    cleaned_ = true;
    cli({"delete", "--force", container_});
    std::error_code ec;
    fs::remove_all(bundle_, ec);
  }

 private:
  int cli(std::vector<std::string> args, std::string* out = nullptr) {
    args.insert(args.begin(), {binary_, "--root", root_.string()});
    std::string text;
    int rc = run_helper(args, text);
    if (out) *out = text;
    return rc;
  }
  bool cli_ok(std::vector<std::string> args, std::string& error) {
    std::string out;
    if (cli(std::move(args), &out) == 0) return true;
    error = std::string(trim(out, kLineSpace));
    return false;
  }

  std::string binary_;
  fs::path root_;
  std::string container_;
  fs::path bundle_;
  pid_t pid_;
  int pidfd_;
  bool cleaned_ = false;
};

// The container id must be unique on the machine: the OCI runtime's cgroups are named after it.
std::string container_id(const std::string& id) { return "sluice-" + std::to_string(::getpid()) + "-" + id; }

}  // namespace

OciHandler::OciHandler(std::string binary, fs::path state_root)
    : name_(binary), state_root_(std::move(state_root)) {
  const char* path = std::getenv("PATH");
  path_ = resolve_executable(binary, path ? path : "/usr/local/bin:/usr/bin:/bin");
  if (!path_.empty() && ::access(path_.c_str(), X_OK) != 0) path_.clear();
}

std::optional<std::string> OciHandler::unavailable_reason() {
  std::lock_guard lock(mu_);
  if (verdict_) return *verdict_;
  if (path_.empty()) {
    verdict_ = std::optional<std::string>(name_ + " is not installed (not found in PATH)");
    return *verdict_;
  }
  // A trivial bundle: the host's own /usr (read-only) and /bin/true. Whatever stops it stops real apps.
  auto bundle = state_root_ / "probe-bundle";
  auto rootfs = bundle / "rootfs";
  std::error_code ec;
  fs::create_directories(rootfs, ec);
  OciConfig cfg;
  cfg.args = {"/bin/true"};
  cfg.env = {"PATH=/usr/bin:/bin"};
  cfg.rootfs = fs::absolute(rootfs);
  cfg.hostname = "probe";
  cfg.dns_files = false;
  cfg.binds.push_back(BindMount{"/usr", "/usr", true});
  for (const char* top : {"bin", "sbin", "lib", "lib64"}) {
    fs::path host = fs::path("/") / top;
    if (fs::is_symlink(host, ec)) {
      fs::create_symlink(fs::read_symlink(host, ec), rootfs / top, ec);
    } else if (fs::is_directory(host, ec)) {
      cfg.binds.push_back(BindMount{host, std::string("/") + top, true});
    }
  }
  std::string error, out;
  std::string id = container_id("probe");
  if (!write_bundle(bundle, cfg, error)) {
    verdict_ = std::optional<std::string>(error);
  } else {
    int rc = run_helper({path_, "--root", state_root_.string(), "run", "--bundle", bundle.string(), id}, out);
    std::string ignored;
    run_helper({path_, "--root", state_root_.string(), "delete", "--force", id}, ignored);
    verdict_ = rc == 0 ? std::optional<std::string>()
                       : std::optional<std::string>(name_ + " failed a trivial bundle: " + std::string(trim(out, kLineSpace)));
  }
  fs::remove_all(bundle, ec);
  return *verdict_;
}

std::unique_ptr<Task> OciHandler::start(const StartRequest& req, std::string& error) {
  if (req.spec.rootfs.empty()) {
    error = "handler '" + name_ + "' needs a rootfs directory";
    return nullptr;
  }
  std::error_code ec;
  if (!fs::is_directory(req.spec.rootfs, ec)) {
    error = "rootfs " + req.spec.rootfs.string() + " is not a directory";
    return nullptr;
  }
  OciConfig cfg;
  cfg.args = req.spec.command;
  cfg.env = req.env;
  cfg.cwd = req.spec.working_dir.empty() ? "/" : req.spec.working_dir.string();
  cfg.rootfs = fs::absolute(req.spec.rootfs);
  cfg.hostname = req.spec.id;
  cfg.uid = req.spec.run_as_user.value_or(0);
  cfg.gid = req.spec.run_as_group.value_or(0);
  if (req.sandbox) {
    // runc opens the path itself: our fd, seen through /proc, names the pod's namespace.
    const std::string fds = "/proc/" + std::to_string(::getpid()) + "/fd/";
    cfg.netns_path = fds + std::to_string(req.sandbox->netns_fd);
    cfg.ipcns_path = fds + std::to_string(req.sandbox->ipcns_fd);
    cfg.memory_limit_bytes = req.sandbox->limits.memory_bytes;
    cfg.cpu_millis = req.sandbox->limits.cpu_millis;
  }
  auto bundle = req.instance_dir / "bundle";
  if (!write_bundle(bundle, cfg, error)) return nullptr;
  auto id = container_id(req.spec.id);
  SpawnRequest sr;
  sr.argv = {path_, "--root", state_root_.string(), "run", "--bundle", bundle.string(), id};
  for (char** e = environ; *e; ++e) sr.env.emplace_back(*e);
  sr.stdout_fd = req.stdout_fd;
  sr.stderr_fd = req.stderr_fd;
  sr.parent_death_signal = req.spec.die_with_starter ? SIGKILL : 0;
  auto spawned = spawn_process(sr);
  if (spawned.pid < 0) {
    error = spawned.error;
    return nullptr;
  }
  return std::make_unique<OciTask>(path_, state_root_, id, bundle, spawned);
}

}  // namespace sluice::runtime
