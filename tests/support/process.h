// A child process for tests: started with posix_spawn, stdout (and stderr) read line by line on a thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sluice::test {

struct ProcessOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to (and overriding) the parent's environment
  std::vector<std::string> unset_env;      // removed from the inherited environment
  bool merge_stderr = false;               // stderr into the same line stream as stdout
};

class Process {
 public:
  explicit Process(ProcessOptions opts);
  ~Process();  // SIGKILL if still running, then reap
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // Waits for an output line containing `needle`; returns it, or nullopt at the deadline.
  std::optional<std::string> wait_for_line(const std::string& needle,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::vector<std::string> lines() const;
  std::string stderr_text() const;
  std::string stdout_text() const;  // byte-exact

  void signal(int sig);
  // Waits for exit; returns the wait status, or nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool running();
  // After exit: waits until everything the child wrote has been read (its pipes closed).
  void join_output();

 private:
  void read_loop(int fd, bool is_stdout);

  pid_t pid_ = -1;
  std::optional<int> status_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::string stderr_;
  std::string stdout_;
  std::thread out_reader_, err_reader_;
};

// Runs a command to completion (bounded by `timeout`), returning its exit status and stdout.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Extracts the integer value of "key":N from a JSON log line; -1 when absent.
long json_int_field(const std::string& line, const std::string& key);

// Resident set size (VmRSS) of a process, in KiB.
long rss_kib(pid_t pid);

}  // namespace sluice::test
