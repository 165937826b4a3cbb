// See node_harness.h.
#include "node_harness.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "app/node/join.h"
#include "app/node/node_socket.h"
#include "runtime/cgroup_fs.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {

namespace fs = std::filesystem;
namespace node = sluice::app::node;
using namespace std::chrono_literals;

Pod::Pod() : holder_(ProcessOptions{.argv = {"unshare", "--net", "--", "tail", "-f", "/dev/null"}}) {
  const auto own = fs::read_symlink("/proc/self/ns/net");
  const bool made = eventually([&] {
    std::error_code ec;
    const auto ns = fs::read_symlink(path(), ec);
    return !ec && ns != own;
  }, 10s);
  if (!made) throw std::runtime_error("unshare --net did not make a namespace");
  if (run({"ip", "link", "set", "lo", "up"}).exit_code != 0) throw std::runtime_error("ip link set lo up");
}

std::string Pod::path() const { return "/proc/" + std::to_string(holder_.pid()) + "/ns/net"; }

std::vector<std::string> Pod::exec(std::vector<std::string> argv) const {
  argv.insert(argv.begin(), {"nsenter", "--net=" + path(), "--"});
  return argv;
}

std::vector<std::string> Pod::exec_as(int uid, std::vector<std::string> argv) const {
  argv.insert(argv.begin(), {"nsenter", "--net=" + path(), "-S", std::to_string(uid), "-G", std::to_string(uid), "--"});
  return argv;
}

CommandResult Pod::run(std::vector<std::string> argv) const { return run_command(exec(std::move(argv)), 20s); }

namespace {

std::atomic<int> cgroup_count{0};

void write_to(const fs::path& file, const std::string& value) {
  std::string error;
  if (!runtime::cgroup::write_file(file, value, &error)) throw std::runtime_error(error);
}

}  // namespace

PodCgroup::PodCgroup(const std::string& uid, std::optional<int> cpu_quota_percent) {
  const std::string base = "sluice-node-test-" + std::to_string(::getpid()) + "-" + std::to_string(cgroup_count++);
  auto make = [&](const fs::path& own) {
    for (const auto& d : {own / base, own / base / ("pod" + uid), own / base / ("pod" + uid) / "queue-proxy"}) {
      fs::create_directory(d);
      made_.push_back(d);
    }
    leaves_.push_back(made_.back());
    return made_[made_.size() - 2];  // the pod's
  };
  const auto v2 = runtime::cgroup::unified();
  if (!v2) throw std::runtime_error("no cgroup v2 hierarchy");
  make(v2->own_dir());
  if (cpu_quota_percent) {
    const auto cpu = runtime::cgroup::v1("cpu");
    if (!cpu) throw std::runtime_error("no cgroup v1 cpu hierarchy");
    const auto pod = make(cpu->own_dir());
    write_to(pod / "cpu.cfs_period_us", "100000");
    write_to(pod / "cpu.cfs_quota_us", std::to_string(*cpu_quota_percent * 1000));
    cpu_ = pod;
  }
}

PodCgroup::~PodCgroup() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    std::string error;
    if (!runtime::cgroup::remove_dir(*it, 10s, &error)) ADD_FAILURE() << "cgroup left behind: " << error;
  }
}

std::vector<std::string> PodCgroup::wrap(std::vector<std::string> argv) const {
  std::string script;
  for (const auto& leaf : leaves_) script += "echo $$ > '" + (leaf / "cgroup.procs").string() + "' && ";
  script += "exec \"$@\"";
  argv.insert(argv.begin(), {"/bin/sh", "-c", script, "sh"});
  return argv;
}

void NodeAgent::SetUp() {
  SLUICE_NEED("netns");
  SLUICE_NEED("cgroup2");
  pod_ = std::make_unique<Pod>();
  app_ = std::make_unique<Process>(ProcessOptions{.argv = pod_->exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
  fs::create_directories(dir_);
  // What the pod's user may reach: the volumes' directory, and a copy of the stub's binary (the build tree
  // may sit where only root can look). The stub is the small sluice-node-stub, as deploy/node runs it;
  // `sluice node-stub` is the same code (the conformance suite's sluice-node flavour runs that).
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  fs::copy_file(SLUICE_NODE_STUB_BIN, stub_bin_);
  env_ = knative_env(8080);
  env_["QUEUE_SERVING_PORT"] = "8012";
  env_["SLUICE_DRAIN_QUIET_PERIOD_MS"] = "0";
}

void NodeAgent::TearDown() {
  cgroups_.clear();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::unique_ptr<Process> NodeAgent::start_agent(std::map<std::string, std::string> env) {
  env["SLUICE_NODE_CONTROL_SOCKET"] = control_;
  auto agent = std::make_unique<Process>(ProcessOptions{.argv = {SLUICE_BIN, "node"}, .env = env});
  if (!agent->wait_for_line("node agent listening", 10s))
    ADD_FAILURE() << "no agent: " << agent->stdout_text() << agent->stderr_text();
  return agent;
}

CommandResult NodeAgent::node_command(std::vector<std::string> args) const {
  args.insert(args.begin(), {"env", "SLUICE_NODE_CONTROL_SOCKET=" + control_, SLUICE_BIN, "node"});
  return run_command(args, 20s);
}

std::string NodeAgent::uid_of(const std::string& name) {
  auto& uid = uids_[name];
  if (uid.empty()) {
    char text[40];
    std::snprintf(text, sizeof text, "0000%04x-0000-4000-8000-%012zx", static_cast<unsigned>(::getpid() & 0xffff),
                  uids_.size());
    uid = text;
  }
  return uid;
}

std::string NodeAgent::publish(const std::string& name) {
  const auto target = target_of(name);
  const auto r = node_command({"publish", volume_of(name), env_.at("SERVING_NAMESPACE"), name, uid_of(name), target.string()});
  if (r.exit_code != 0) ADD_FAILURE() << "publish " << name << ": " << r.out << r.err;
  return (target / "node.sock").string();
}

std::unique_ptr<Process> NodeAgent::start_stub_in(const Pod& pod, std::map<std::string, std::string> env, int uid,
                                                  const PodCgroup* cgroup, std::string socket) {
  const std::string name = env.at("SERVING_POD");
  env["SLUICE_NODE_SOCKET"] = socket.empty() ? publish(name) : socket;
  if (!cgroup) {
    auto& own = cgroups_[name];
    if (!own) own = std::make_unique<PodCgroup>(uid_of(name));
    cgroup = own.get();
  }
  return std::make_unique<Process>(ProcessOptions{.argv = cgroup->wrap(pod.exec_as(uid, {stub_bin_})), .env = env});
}

std::unique_ptr<NodeAgent::Joined> NodeAgent::join_as(const std::string& name,
                                                      const std::map<std::string, std::string>& env,
                                                      const std::vector<int>& fds, int uid, std::string socket) {
  if (socket.empty()) socket = publish(name);
  auto& cgroup = cgroups_[name];
  if (!cgroup) cgroup = std::make_unique<PodCgroup>(uid_of(name));
  std::vector<std::string> lines;
  for (const auto& [k, v] : env) lines.push_back(k + "=" + v);
  const std::string text = node::join_text(lines);
  std::vector<std::string> procs;
  for (const auto& leaf : cgroup->dirs()) procs.push_back((leaf / "cgroup.procs").string());
  // The connecting process: into the pod's cgroup, to the pod's user, connects and hands the connection
  // back, then waits until the parent has its reply (the agent reads the peer's cgroup meanwhile).
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) throw std::runtime_error("socketpair");
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pair[0]);
    for (const auto& file : procs) {
      const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(1);
      ::close(fd);
    }
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(1);
    const int conn = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (node::unix_connect(conn, socket) != 0) ::_exit(2);
    const int handed[] = {conn};
    if (!app::send_message(pair[1], "connected\n", handed)) ::_exit(1);
    char byte;
    while (::read(pair[1], &byte, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(pair[1]);
  auto joined = std::make_unique<Joined>();
  if (auto m = app::receive_message(pair[0]); m && m->fds.size() == 1) {
    joined->connection = m->fds[0].release();
    if (app::send_message(joined->connection, text, fds))
      if (auto reply = app::receive_message(joined->connection)) {
        joined->reply = reply->text;
        reply->close_fds();
      }
  }
  ::close(pair[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return joined;
}

long NodeAgent::proxy_pid(const Process& agent) {
  const std::string out = agent.stdout_text();
  const auto at = out.rfind("pod joined");
  if (at == std::string::npos) return -1;
  const auto line = out.substr(at);
  return json_int_field(line.substr(0, line.find('\n')), "proxy_pid");
}

std::vector<long> NodeAgent::children(long pid) {
  std::vector<long> out;
  const auto listed = run_command({"pgrep", "-P", std::to_string(pid)}).out;
  for (std::size_t at = 0; at < listed.size();) {
    const auto end = listed.find('\n', at);
    out.push_back(std::stol(listed.substr(at, end - at)));
    at = end == std::string::npos ? listed.size() : end + 1;
  }
  return out;
}

std::string NodeAgent::command_line(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

std::string NodeAgent::name_of(long pid) {
  std::string name;
  std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/comm"), name);
  return name;
}

long NodeAgent::zygote_of(long agent) {
  long zygote = -1;
  eventually([&] {
    for (long child : children(agent))
      if (name_of(child) == "sluice-zygote") zygote = child;
    return zygote > 0;
  }, 10s);
  return zygote;
}

long NodeAgent::parent_of(long pid) {
  const auto ppid = status_field(pid, "PPid:");
  return ppid.empty() ? -1 : std::stol(ppid);
}

std::string NodeAgent::status_field(long pid, const std::string& field) {
  std::string line;
  for (std::ifstream status("/proc/" + std::to_string(pid) + "/status"); std::getline(status, line);)
    if (line.rfind(field, 0) == 0) {
      auto value = line.substr(field.size());
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  return {};
}

bool NodeAgent::listening() const {
  return pod_->run({"ss", "-Htln", "sport = :8012"}).out.find("8012") != std::string::npos;
}

bool NodeAgent::serves_in(const Pod& pod) {
  return pod.run({"curl", "-sS", "--max-time", "5", "http://127.0.0.1:8012/"}).out == "Hello from sluice-demo-app\n";
}

bool NodeAgent::serves() const { return serves_in(*pod_); }

}  // namespace sluice::test
