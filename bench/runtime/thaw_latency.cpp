// sluice-thaw-bench: what thawing a paused app instance adds to the request that wakes it, per throttle
// mechanism. Each cycle sends one request to the running instance (the baseline), freezes it, then thaws it
// and at once sends the next request on the same keep-alive connection, as the gateway does when a request
// arrives for an idle instance. Loopback only; every wait is bounded.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_error.h"
#include "runtime/readiness.h"
#include "runtime/runtime.h"

namespace {

namespace rt = sluice::runtime;
using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kUsage =
    "usage: sluice-thaw-bench --app PATH [--cycles N] [--mechanisms LIST] [--path /]\n"
    "  --app PATH        HTTP/1.1 server honouring PORT (e.g. build/release/demo/sluice-demo-app)\n"
    "  --cycles N        freeze/thaw cycles per mechanism, 1..100000 (default 2000)\n"
    "  --mechanisms L    comma-separated throttle names, or 'all' (default): cgroup2-freeze,\n"
    "                    cgroup2-cpu-max,cgroup1-freezer,cgroup1-cfs-quota,sigstop\n"
    "  --path P          request target (default /)\n";

struct Options {
  std::string app;
  int cycles = 2000;
  std::vector<std::string> mechanisms{"cgroup2-freeze", "cgroup2-cpu-max", "cgroup1-freezer",
                                      "cgroup1-cfs-quota", "sigstop"};
  std::string path = "/";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(std::string(a) + " needs a value\n" + kUsage);
    std::string v = argv[++i];
    if (a == "--app") {
      o.app = v;
    } else if (a == "--cycles") {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > 100000) throw std::invalid_argument("--cycles " + v + " is not in 1..100000");
      o.cycles = static_cast<int>(n);
    } else if (a == "--mechanisms") {
      if (v != "all") {
        o.mechanisms.clear();
        size_t start = 0;
        while (start <= v.size()) {
          size_t comma = std::min(v.find(',', start), v.size());
          if (comma > start) o.mechanisms.push_back(v.substr(start, comma - start));
          start = comma + 1;
        }
      }
    } else if (a == "--path") {
      o.path = v;
    } else {
      throw std::invalid_argument("unknown argument '" + std::string(a) + "'\n" + kUsage);
    }
  }
  if (o.app.empty()) throw std::invalid_argument(std::string("--app is required\n") + kUsage);
  return o;
}

// An ephemeral loopback port, free when this returns (the app binds it a moment later).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error(std::string("free port: ") + std::strerror(errno));
  ::close(fd);
  return ntohs(addr.sin_port);
}

// One keep-alive HTTP/1.1 connection to the instance; a request is timed to its first and last byte.
class Client {
 public:
  Client(int port, std::string path) {
    request_ = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n\r\n";
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends the request and reads the whole response (Content-Length framed); the time of its first byte.
  Steady::time_point exchange() {
    if (::send(fd_, request_.data(), request_.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request_.size()))
      throw std::runtime_error(std::string("send: ") + std::strerror(errno));
    std::string got;
    std::optional<Steady::time_point> first;
    size_t want = std::string::npos;
    char buf[4096];
    while (got.size() < want) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) throw std::runtime_error("no response within 5 s");
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) throw std::runtime_error("connection closed by the app");
      if (!first) first = Steady::now();
      got.append(buf, static_cast<size_t>(n));
      auto end = got.find("\r\n\r\n");
      if (want == std::string::npos && end != std::string::npos) {
        if (got.compare(0, 12, "HTTP/1.1 200") != 0) throw std::runtime_error("unexpected: " + got.substr(0, 40));
        auto cl = got.find("Content-Length: ");
        if (cl == std::string::npos || cl > end) throw std::runtime_error("response without Content-Length");
        want = end + 4 + std::strtoul(got.c_str() + cl + 16, nullptr, 10);
      }
    }
    return *first;
  }

 private:
  int fd_ = -1;
  std::string request_;
};

double micros(Steady::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Nearest-rank percentile of sorted samples.
double percentile(const std::vector<double>& sorted, double q) {
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

struct Samples {
  std::vector<double> thaw, wake, base;  // thaw() alone; thaw start to first byte; unfrozen request
};

Samples measure(rt::Runtime& runtime, const Options& o, int port) {
  Client client(port, o.path);
  for (int i = 0; i < 50; ++i) client.exchange();  // warm the app's and the kernel's paths
  Samples s;
  for (int i = 0; i < o.cycles; ++i) {
    auto sent = Steady::now();
    s.base.push_back(micros(client.exchange() - sent));
    if (auto f = runtime.freeze("bench"); !f) throw std::runtime_error(f.error());
    auto began = Steady::now();
    if (auto t = runtime.thaw("bench"); !t) throw std::runtime_error(t.error());
    auto thawed = Steady::now();
    auto first = client.exchange();
    s.thaw.push_back(micros(thawed - began));
    s.wake.push_back(micros(first - began));
  }
  for (auto* v : {&s.thaw, &s.wake, &s.base}) std::sort(v->begin(), v->end());
  return s;
}

// One mechanism: a runtime forced to it, one instance of the app, the cycles. False when unusable here.
bool bench_mechanism(const Options& o, const std::string& mechanism) {
  rt::RuntimeOptions ro;
  ro.throttle = mechanism;
  ro.cgroup_name = "sluice-thaw-bench-" + std::to_string(::getpid());
  std::optional<rt::Runtime> runtime;
  try {
    runtime.emplace(std::move(ro));
  } catch (const sluice::ConfigError& e) {
    std::printf("%-18s skipped: %s\n", mechanism.c_str(), e.what());
    return false;
  }
  rt::InstanceSpec spec;
  spec.id = "bench";
  spec.command = {o.app};
  spec.port = free_port();
  if (auto c = runtime->create(spec); !c) throw std::runtime_error(c.error());
  if (auto s = runtime->start("bench"); !s) throw std::runtime_error(s.error());
  rt::ReadinessProbe probe;
  probe.port = spec.port;
  auto ready = rt::wait_ready(probe, Steady::now() + 10s, {}, [&] {
    return runtime->status("bench")->state == rt::InstanceState::exited;
  });
  if (ready.outcome != rt::Readiness::ready)
    throw std::runtime_error(o.app + " not ready on port " + std::to_string(spec.port) + ": " + ready.last_error);
  auto s = measure(*runtime, o, spec.port);
  std::printf("%-18s %7zu %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n", mechanism.c_str(), s.wake.size(),
              percentile(s.thaw, 0.5), percentile(s.thaw, 0.99), percentile(s.base, 0.5), percentile(s.base, 0.99),
              percentile(s.wake, 0.5), percentile(s.wake, 0.99), percentile(s.wake, 0.5) - percentile(s.base, 0.5),
              percentile(s.wake, 0.99) - percentile(s.base, 0.99));
  std::fflush(stdout);
  (void)runtime->remove("bench");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    {
      rt::RuntimeOptions ro;
      ro.cgroup_name = "sluice-thaw-bench-" + std::to_string(::getpid());
      rt::Runtime detect(std::move(ro));
      std::printf("auto-detected throttle: %s (%s)\n", std::string(rt::to_string(detect.throttle().kind)).c_str(),
                  detect.throttle().detail.empty() ? "best available" : detect.throttle().detail.c_str());
    }
    std::printf("app: %s, %d cycles per mechanism; times in µs\n", o.app.c_str(), o.cycles);
    std::printf("%-18s %7s %9s %9s %9s %9s %9s %9s %9s %9s\n", "mechanism", "cycles", "thaw_p50", "thaw_p99",
                "base_p50", "base_p99", "wake_p50", "wake_p99", "added_p50", "added_p99");
    int measured = 0;
    for (const auto& m : o.mechanisms) measured += bench_mechanism(o, m) ? 1 : 0;
    return measured > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-thaw-bench: %s\n", e.what());
    return 2;
  }
}
