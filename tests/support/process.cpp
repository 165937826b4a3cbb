#include "tests/support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace sluice::test {
namespace {

std::vector<std::string> build_env(const ProcessOptions& o) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& k : o.unset_env) env.erase(k);
  for (const auto& [k, v] : o.env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> cstrs(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Process::Process(ProcessOptions opts) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, opts.merge_stderr ? out[1] : err[1], 2);
  auto envs = build_env(opts);
  auto envp = cstrs(envs);
  auto args = opts.argv;
  auto argv = cstrs(args);
  int rc = posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    throw std::runtime_error("spawn " + opts.argv[0] + ": " + std::strerror(rc));
  }
  out_reader_ = std::thread([this, fd = out[0]] { read_loop(fd, true); });
  err_reader_ = std::thread([this, fd = err[0]] { read_loop(fd, false); });
}

Process::~Process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds(10));
  }
  join_output();
}

void Process::join_output() {
  if (out_reader_.joinable()) out_reader_.join();
  if (err_reader_.joinable()) err_reader_.join();
}

void Process::read_loop(int fd, bool is_stdout) {
  std::string partial;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard lk(mu_);
    if (!is_stdout) {
      stderr_.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    stdout_.append(buf, static_cast<std::size_t>(n));
    partial.append(buf, static_cast<std::size_t>(n));
    std::size_t pos;
    while ((pos = partial.find('\n')) != std::string::npos) {
      lines_.push_back(partial.substr(0, pos));
      partial.erase(0, pos + 1);
    }
    cv_.notify_all();
  }
  std::lock_guard lk(mu_);
  if (is_stdout && !partial.empty()) lines_.push_back(partial);
  cv_.notify_all();
  close(fd);
}

std::optional<std::string> Process::wait_for_line(const std::string& needle,
                                                  std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  std::optional<std::string> found;
  cv_.wait_for(lk, timeout, [&] {
    for (const auto& l : lines_)
      if (l.find(needle) != std::string::npos) {
        found = l;
        return true;
      }
    return false;
  });
  return found;
}

std::vector<std::string> Process::lines() const {
  std::lock_guard lk(mu_);
  return lines_;
}

std::string Process::stdout_text() const {
  std::lock_guard lk(mu_);
  return stdout_;
}

std::string Process::stderr_text() const {
  std::lock_guard lk(mu_);
  return stderr_;
}

void Process::signal(int sig) { ::kill(pid_, sig); }

bool Process::running() {
  if (status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return r == 0;
}

std::optional<int> Process::wait_exit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status_;
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  Process p(ProcessOptions{.argv = argv});
  CommandResult r;
  auto st = p.wait_exit(timeout);
  if (!st) {
    p.signal(SIGKILL);
    p.wait_exit();
    r.exit_code = -1;
  } else {
    r.exit_code = WIFEXITED(*st) ? WEXITSTATUS(*st) : 128 + WTERMSIG(*st);
  }
  p.join_output();
  r.out = p.stdout_text();
  r.err = p.stderr_text();
  return r;
}

long json_int_field(const std::string& line, const std::string& key) {
  auto k = "\"" + key + "\":";
  auto pos = line.find(k);
  if (pos == std::string::npos) return -1;
  return std::strtol(line.c_str() + pos + k.size(), nullptr, 10);
}

long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

}  // namespace sluice::test
