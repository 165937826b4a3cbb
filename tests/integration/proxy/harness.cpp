#include "harness.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <future>

#include "tests/support/eventually.h"
#include <stdexcept>

namespace sluice::test {

Backend::Backend() {
  process = std::make_unique<Process>(ProcessOptions{.argv = {DEMO_APP_BIN, "--port", "0"}});
  auto line = process->wait_for_line("\"listening\"");
  if (!line) throw std::runtime_error("demo app did not start: " + process->stderr_text());
  port = static_cast<int>(json_int_field(*line, "port"));
}

std::map<std::string, std::string> knative_env(int user_port) {
  return {{"CONTAINER_CONCURRENCY", "0"},
          {"QUEUE_SERVING_PORT", "0"},
          {"QUEUE_SERVING_TLS_PORT", "0"},
          {"USER_PORT", std::to_string(user_port)},
          {"REVISION_TIMEOUT_SECONDS", "300"},
          {"SERVING_NAMESPACE", "default"},
          {"SERVING_CONFIGURATION", "demo"},
          {"SERVING_REVISION", "demo-00001"},
          {"SERVING_POD", "demo-00001-pod"},
          {"SERVING_POD_IP", "127.0.0.1"},
          {"SERVING_LOGGING_CONFIG", ""},
          {"SERVING_LOGGING_LEVEL", "info"}};
}

Sidecar::Sidecar(const SidecarOptions& o) {
  auto env = knative_env(o.user_port);
  if (!o.listen_address.empty()) env["SLUICE_LISTEN_ADDRESS"] = o.listen_address;
  env["SLUICE_WORKERS"] = "2";
  // Tests run in parallel: every port is picked by the kernel and read back from the log.
  env["SLUICE_ADMIN_PORT"] = "0";
  env["SLUICE_METRICS_PORT"] = "0";
  env["SLUICE_USER_METRICS_PORT"] = "0";
  // No quiet period unless a test asks for one: SIGTERM then only waits for in-flight exchanges.
  env["SLUICE_DRAIN_QUIET_PERIOD_MS"] = "0";
  for (const auto& [k, v] : o.env) env[k] = v;
  std::vector<std::string> argv = {SLUICE_BIN, "sidecar"};
  argv.insert(argv.end(), o.flags.begin(), o.flags.end());
  process = std::make_unique<Process>(ProcessOptions{.argv = argv, .env = env});
  auto line = process->wait_for_line("\"listener\":\"proxy\"");
  if (!line) throw std::runtime_error("sluice did not start: " + process->stderr_text());
  port = static_cast<int>(json_int_field(*line, "port"));
  // The control listeners are logged before the proxy's line.
  for (const auto& l : process->lines()) {
    if (l.find("\"listener\":\"admin\"") != std::string::npos) admin_port = static_cast<int>(json_int_field(l, "port"));
    if (l.find("\"listener\":\"metrics\"") != std::string::npos) metrics_port = static_cast<int>(json_int_field(l, "port"));
    if (l.find("\"listener\":\"user-metrics\"") != std::string::npos)
      user_metrics_port = static_cast<int>(json_int_field(l, "port"));
    if (l.find("\"listener\":\"tls\"") != std::string::npos) tls_port = static_cast<int>(json_int_field(l, "port"));
  }
}

std::string Sidecar::url(const std::string& path, const std::string& host) const {
  return "http://" + host + ":" + std::to_string(port) + path;
}

CommandResult curl(std::vector<std::string> args, int max_time_seconds) {
  std::vector<std::string> argv = {"curl", "-sS", "--max-time", std::to_string(max_time_seconds)};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, std::chrono::seconds(max_time_seconds + 10));
}

namespace {

int connect_to(int port, const std::string& host) {
  bool v6 = host.find(':') != std::string::npos;
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket");
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, host.c_str(), &a.sin6_addr);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("connect: ") + std::strerror(e));
  }
  return fd;
}

}  // namespace

std::string raw_exchange(int port, const std::string& bytes, std::chrono::milliseconds timeout,
                         const std::string& host) {
  int fd = connect_to(port, host);
  std::size_t off = 0;
  while (off < bytes.size()) {
    auto n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}


RawClient::RawClient(int port, const std::string& host) : fd_(connect_to(port, host)) {}

RawClient::~RawClient() {
  if (fd_ >= 0) ::close(fd_);
}

void RawClient::send(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    auto n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send failed");
    off += static_cast<std::size_t>(n);
  }
}

std::string RawClient::read_until(const std::string& needle, std::chrono::milliseconds timeout, std::size_t times) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  while (count_of(received_, needle) < times) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    received_.append(buf, static_cast<std::size_t>(n));
  }
  return received_;
}

std::string http_get(int port, const std::string& path, const std::string& extra_headers,
                     std::chrono::milliseconds timeout) {
  return raw_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers +
                                "Connection: close\r\n\r\n", timeout);
}

std::string body_of(const std::string& response) {
  auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : response.substr(end + 4);
}

std::optional<double> prometheus_value(const std::string& text, const std::string& name,
                                       const std::string& label_fragment) {
  std::size_t pos = 0;
  while ((pos = text.find(name + "{", pos)) != std::string::npos) {
    if (pos > 0 && text[pos - 1] != '\n') {
      pos += name.size();
      continue;
    }
    auto end = text.find('\n', pos);
    auto line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line.find(label_fragment) != std::string::npos) return std::stod(line.substr(line.rfind(' ') + 1));
    pos = end;
  }
  return std::nullopt;
}

std::string exit_status(Process& p, std::chrono::milliseconds timeout) {
  auto status = p.wait_exit(timeout);
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exited " + std::to_string(WEXITSTATUS(*status));
  return "killed by signal " + std::to_string(WTERMSIG(*status));
}

long app_requests(const Backend& backend) {
  auto stats = body_of(http_get(backend.port, "/stats"));
  auto n = stats.find("requests=");
  return n == std::string::npos ? -1 : std::stol(stats.substr(n + 9));
}

LoadUnderSigterm load_then_sigterm(const Backend& backend, Sidecar& sidecar, std::vector<std::string> load_argv,
                                   long sigterm_after) {
  auto load = std::async(std::launch::async, [&] { return run_command(load_argv, std::chrono::seconds(60)); });
  bool reached = eventually([&] { return app_requests(backend) > sigterm_after; }, std::chrono::seconds(20));
  sidecar.process->signal(SIGTERM);
  return {load.get(), reached};
}

std::size_t count_of(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + needle.size()))
    ++n;
  return n;
}

ReservedPort::ReservedPort() {
  fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
}
ReservedPort::~ReservedPort() { ::close(fd); }
void ReservedPort::listen() { ::listen(fd, 16); }

}  // namespace sluice::test
