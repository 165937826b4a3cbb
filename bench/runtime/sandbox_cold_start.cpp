// sluice-sandbox-bench: what a PodSandbox adds to a cold start. Each round starts the same app three ways,
// interleaved so they share the machine's state: on the host network (create + start + first successful
// TCP connect), in a fresh sandbox (RunPodSandbox first, then the same, at the pod's address), and in a
// sandbox with memory and cpu limits. Teardown is timed apart: it is not on a request's path. Needs root.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/readiness.h"
#include "runtime/runtime.h"

namespace {

namespace rt = sluice::runtime;
using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kUsage =
    "usage: sluice-sandbox-bench --app PATH [--rounds N]\n"
    "  --app PATH    HTTP server honouring PORT, started with --host 0.0.0.0 (sluice-demo-app)\n"
    "  --rounds N    cold starts per variant, 1..1000 (default 30)\n";

double ms_since(Steady::time_point t) { return std::chrono::duration<double, std::milli>(Steady::now() - t).count(); }

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Polls every 0.1 ms (a bound of 10 s) until a TCP connect succeeds.
bool wait_listening(const std::string& host, int port) {
  rt::ReadinessProbe probe;
  probe.host = host;
  probe.port = port;
  std::string error;
  auto deadline = Steady::now() + 10s;
  while (Steady::now() < deadline) {
    if (rt::probe_once(probe, error)) return true;
    ::usleep(100);
  }
  return false;
}

struct Sample {
  double sandbox_ms = 0, start_ms = 0, total_ms = 0, teardown_ms = 0;
};

enum class Variant { host, sandbox, limited };
const char* name(Variant v) { return v == Variant::host ? "host network" : v == Variant::sandbox ? "sandbox" : "sandbox+limits"; }

Sample one(rt::Runtime& runtime, Variant v, const std::string& app, int round) {
  Sample s;
  std::string id = "b" + std::to_string(round) + "-" + std::to_string(static_cast<int>(v));
  rt::InstanceSpec spec;
  spec.id = id;
  spec.command = {app, "--host", "0.0.0.0"};
  spec.port = v == Variant::host ? free_port() : 8080;
  std::string host = "127.0.0.1";
  auto t0 = Steady::now();
  if (v != Variant::host) {
    rt::PodSandboxConfig pod{id, {}};
    if (v == Variant::limited) pod.limits = rt::PodLimits{256ULL << 20, 1000};
    if (auto ok = runtime.run_pod_sandbox(pod); !ok) throw std::runtime_error(ok.error());
    host = runtime.pod_sandbox_status(id)->address;
    spec.sandbox = id;
    s.sandbox_ms = ms_since(t0);
  }
  auto t1 = Steady::now();
  if (auto ok = runtime.create(spec); !ok) throw std::runtime_error(ok.error());
  if (auto ok = runtime.start(id); !ok) throw std::runtime_error(ok.error());
  s.start_ms = ms_since(t1);
  if (!wait_listening(host, spec.port)) throw std::runtime_error(id + " not listening after 10 s");
  s.total_ms = ms_since(t0);
  auto t2 = Steady::now();
  (void)runtime.remove(id);
  if (v != Variant::host) (void)runtime.remove_pod_sandbox(id);
  s.teardown_ms = ms_since(t2);
  return s;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  return v[std::min(v.size(), std::max<std::size_t>(rank, 1)) - 1];
}

}  // namespace

int main(int argc, char** argv) {
  std::string app;
  int rounds = 30;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n%s", argv[i], kUsage);
      return 2;
    }
    if (a == "--app") app = argv[++i];
    else if (a == "--rounds") rounds = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "unknown option %s\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (app.empty() || rounds < 1 || rounds > 1000) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  rt::RuntimeOptions opts;
  rt::Runtime runtime(opts);
  if (auto why = runtime.sandbox_unavailable_reason()) {
    std::fprintf(stderr, "sandboxes unavailable here: %s\n", why->c_str());
    return 1;
  }
  const Variant variants[] = {Variant::host, Variant::sandbox, Variant::limited};
  std::vector<Sample> samples[3];
  try {
    (void)one(runtime, Variant::sandbox, app, -1);  // warm-up: page cache, first netns
    for (int r = 0; r < rounds; ++r)
      for (auto v : variants) samples[static_cast<int>(v)].push_back(one(runtime, v, app, r));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-sandbox-bench: %s\n", e.what());
    return 1;
  }
  std::printf("cold start to first TCP connect, %d rounds, throttle %s; ms, median / p90\n", rounds,
              std::string(rt::to_string(runtime.throttle().kind)).c_str());
  std::printf("%-16s %15s %15s %15s %15s\n", "variant", "RunPodSandbox", "create+start", "total", "teardown");
  for (auto v : variants) {
    std::vector<double> sb, st, tot, td;
    for (const auto& s : samples[static_cast<int>(v)]) {
      sb.push_back(s.sandbox_ms);
      st.push_back(s.start_ms);
      tot.push_back(s.total_ms);
      td.push_back(s.teardown_ms);
    }
    std::printf("%-16s %7.2f / %5.2f %7.2f / %5.2f %7.2f / %5.2f %7.2f / %5.2f\n", name(v), pct(sb, 50), pct(sb, 90),
                pct(st, 50), pct(st, 90), pct(tot, 50), pct(tot, 90), pct(td, 50), pct(td, 90));
  }
  auto total = [&](Variant v) {
    std::vector<double> t;
    for (const auto& s : samples[static_cast<int>(v)]) t.push_back(s.total_ms);
    return pct(t, 50);
  };
  double host = total(Variant::host);
  for (auto v : {Variant::sandbox, Variant::limited})
    std::printf("%s adds %.2f ms to a cold start (median; ratio %.2f; goal <= 5 ms)\n", name(v), total(v) - host,
                total(v) / host);
  return 0;
}
