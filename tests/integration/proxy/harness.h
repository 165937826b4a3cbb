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
  std::string listen_address = "127.0.0.1";  // empty: the sidecar's default (dual-stack where IPv6 is)
};

struct Sidecar {
  explicit Sidecar(const SidecarOptions& o);
  std::unique_ptr<Process> process;
  int port = 0;
  int admin_port = 0;         // /wait-for-drain
  int metrics_port = 0;       // the autoscaler's /metrics
  int user_metrics_port = 0;  // request metrics, when enabled (else 0)
  int tls_port = 0;           // when a certificate is configured (else 0)
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

// A client connection the test drives by hand: send part of a request, hold it, send the rest.
class RawClient {
 public:
  explicit RawClient(int port, const std::string& host = "127.0.0.1");
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  void send(const std::string& bytes);
  // Reads until `needle` has arrived (`times` times in all), the peer closes, or `timeout` passes; returns
  // all read so far.
  std::string read_until(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                         std::size_t times = 1);

 private:
  int fd_ = -1;
  std::string received_;
};

// GET `path` on `port` with extra header lines ("Name: value\r\n"...); returns the whole response.
std::string http_get(int port, const std::string& path, const std::string& extra_headers = "",
                     std::chrono::milliseconds timeout = std::chrono::seconds(5));

// The body of an HTTP/1.1 response held whole in `response` ("" when there is no head end).
std::string body_of(const std::string& response);

// The value of the Prometheus sample whose line starts with `name{` and contains `label_fragment`;
// nullopt when there is none.
std::optional<double> prometheus_value(const std::string& text, const std::string& name,
                                       const std::string& label_fragment = "");

// How the process ended within `timeout`: "exited N", "killed by signal N", or "still running".
std::string exit_status(Process& p, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Requests the demo app has served so far (its /stats, which counts itself), or -1.
long app_requests(const Backend& backend);

// Runs a bounded load command (h2load, ...) and sends SIGTERM to the sidecar once the app has served
// more than `sigterm_after` requests.
struct LoadUnderSigterm {
  CommandResult load;
  bool signalled_under_load = false;  // false: the load never got that far, the signal came after
};
LoadUnderSigterm load_then_sigterm(const Backend& backend, Sidecar& sidecar, std::vector<std::string> load_argv,
                                   long sigterm_after);

// A loopback port that refuses connections until listen() is called on it.
struct ReservedPort {
  ReservedPort();
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  void listen();
  int fd = -1;
  int port = 0;
};

// Counts non-overlapping occurrences.
std::size_t count_of(const std::string& haystack, const std::string& needle);

}  // namespace sluice::test
