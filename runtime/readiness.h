// Readiness of an instance: TCP connect (or HTTP GET) to its port, polled until ready, a deadline, or cancel.
#pragma once

#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

namespace sluice::runtime {

struct ReadinessProbe {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string http_path;  // empty: TCP connect only; else GET it, 200-399 is ready
  std::chrono::milliseconds period{25};       // SPEC §8: every 25-50 ms at start
  std::chrono::milliseconds try_timeout{100};
};

enum class Readiness { ready, deadline, cancelled, gave_up };

struct ReadinessResult {
  Readiness outcome = Readiness::deadline;
  int attempts = 0;
  std::string last_error;  // of the last failed try, e.g. "connect: Connection refused"
  std::chrono::milliseconds waited{0};
};

// One try; true when ready, else false with `error`.
bool probe_once(const ReadinessProbe& probe, std::string& error);

// Polls until ready or `deadline`; stops early when `stop` is requested or `give_up()` (checked each period,
// e.g. "the instance exited") returns true.
ReadinessResult wait_ready(const ReadinessProbe& probe, std::chrono::steady_clock::time_point deadline,
                           std::stop_token stop = {}, const std::function<bool()>& give_up = {});

}  // namespace sluice::runtime
