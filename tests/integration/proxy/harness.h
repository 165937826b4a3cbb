// Starts the real processes integration tests talk to: the demo app and `sluice sidecar` in front of it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace sluice::test {

struct Backend {
  Backend();
  std::unique_ptr<Process> process;
  int port = 0;
};

struct SidecarOptions {
  int user_port = 0;
  std::map<std::string, std::string> env;  // overrides of the Knative variables
  std::vector<std::string> flags;
  std::string listen_address = "127.0.0.1";
};

struct Sidecar {
  explicit Sidecar(const SidecarOptions& o);
  std::unique_ptr<Process> process;
  int port = 0;
  std::string url(const std::string& path, const std::string& host = "127.0.0.1") const;
};

// The Knative variables a queue-proxy gets, for a backend on `user_port`.
std::map<std::string, std::string> knative_env(int user_port);

// curl with -sS and a bounded --max-time; returns exit code, stdout and stderr.
CommandResult curl(std::vector<std::string> args, int max_time_seconds = 30);

// Sends raw bytes on a fresh connection and reads until the peer closes or `timeout` passes.
std::string raw_exchange(int port, const std::string& bytes,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5),
                         const std::string& host = "127.0.0.1");

// Counts non-overlapping occurrences.
std::size_t count_of(const std::string& haystack, const std::string& needle);

}  // namespace sluice::test
