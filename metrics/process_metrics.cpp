// process_* families; see process_metrics.h.
#include "metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "metrics/exposition.h"

namespace sluice::metrics {
namespace {

struct Stat {
  double cpu_seconds = 0;
  double start_ticks = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
};

// /proc/self/stat: fields after the command's closing parenthesis, the first of them field 3 (state).
std::optional<Stat> read_stat() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  if (f.size() < 22) return std::nullopt;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto at = [&](int field) { return std::stod(f[static_cast<std::size_t>(field - 3)]); };
  return Stat{.cpu_seconds = (at(14) + at(15)) / ticks,
              .start_ticks = at(22) / ticks,
              .virtual_bytes = at(23),
              .resident_bytes = at(24) * static_cast<double>(sysconf(_SC_PAGESIZE))};
}

std::optional<double> boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double t = 0;
      if (in >> t) return t;
      return std::nullopt;
    }
    in.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

std::optional<double> open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return std::nullopt;
  double n = 0;
  while (auto* e = readdir(d))
    if (e->d_name[0] != '.') ++n;  // the directory's own descriptor counts, as in Go's reading of it
  closedir(d);
  return n;
}

double limit(int resource) {
  rlimit l{};
  if (getrlimit(resource, &l) != 0) return 0;
  return l.rlim_cur == RLIM_INFINITY ? 18446744073709551615.0 : static_cast<double>(l.rlim_cur);
}

// Received and sent bytes over every interface of /proc/self/net/dev.
std::optional<std::pair<double, double>> network_bytes() {
  std::ifstream in("/proc/self/net/dev");
  if (!in) return std::nullopt;
  std::string line;
  double rx = 0, tx = 0;
  for (int n = 0; std::getline(in, line); ++n) {
    auto colon = line.find(':');
    if (n < 2 || colon == std::string::npos) continue;  // two header lines
    std::istringstream f(line.substr(colon + 1));
    double v[9] = {};
    for (auto& x : v) f >> x;
    rx += v[0];
    tx += v[8];
  }
  return std::pair{rx, tx};
}

void gauge(std::string& out, std::string_view name, std::string_view help, std::string_view type, double v) {
  write_family(out, name, help, type);
  write_sample(out, name, {}, v);
}

}  // namespace

void write_process_families(std::string& out) {
  const auto stat = read_stat();
  if (stat) gauge(out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter",
                  stat->cpu_seconds);
  gauge(out, "process_max_fds", "Maximum number of open file descriptors.", "gauge", limit(RLIMIT_NOFILE));
  if (auto net = network_bytes()) {
    gauge(out, "process_network_receive_bytes_total", "Number of bytes received by the process over the network.",
          "counter", net->first);
    gauge(out, "process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.",
          "counter", net->second);
  }
  if (auto fds = open_fds()) gauge(out, "process_open_fds", "Number of open file descriptors.", "gauge", *fds);
  if (stat) {
    gauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", stat->resident_bytes);
    if (auto boot = boot_time())
      gauge(out, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge",
            *boot + stat->start_ticks);
    gauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", stat->virtual_bytes);
  }
  gauge(out, "process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", "gauge",
        limit(RLIMIT_AS));
}

}  // namespace sluice::metrics
