// A port that another sluice already listens on is a start-up error for every listener, as in nginx:
// the workers of one process share their ports through SO_REUSEPORT, which must not let a second
// process in (the kernel would split connections between the two).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

// A self-signed certificate for the TLS listener.
class Cert {
 public:
  Cert() {
    dir_ = fs::temp_directory_path() / ("sluice-port-in-use-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto r = run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key(), "-out",
                          cert(), "-days", "2", "-subj", "/CN=localhost"});
    if (r.exit_code != 0) throw std::runtime_error("openssl req failed: " + r.err);
  }
  ~Cert() { fs::remove_all(dir_); }
  std::string cert() const { return (dir_ / "tls.crt").string(); }
  std::string key() const { return (dir_ / "tls.key").string(); }

 private:
  fs::path dir_;
};

// Starts a second sidecar whose `variable` names `port` (every other port free) and expects it to exit 1
// naming the address.
void expect_refused(int backend_port, const std::string& variable, int port,
                    std::map<std::string, std::string> extra = {}) {
  auto env = knative_env(backend_port);
  env["SLUICE_LISTEN_ADDRESS"] = "127.0.0.1";
  env["SLUICE_WORKERS"] = "2";
  env["SLUICE_ADMIN_PORT"] = env["SLUICE_METRICS_PORT"] = env["SLUICE_USER_METRICS_PORT"] = "0";
  for (const auto& [k, v] : extra) env[k] = v;
  env[variable] = std::to_string(port);
  Process second(ProcessOptions{.argv = {SLUICE_BIN, "sidecar"}, .env = env});
  auto st = second.wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(st) << variable << ": the second sidecar is still running";
  second.join_output();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << variable << ": " << second.stderr_text();
  EXPECT_NE(second.stderr_text().find("address already in use: 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << variable << ": " << second.stderr_text();
}

// Every request on fresh connections (each one could land on either process were the port shared).
void expect_first_serves_all(const Sidecar& first) {
  constexpr int kRequests = 60;
  int ok = 0;
  for (int i = 0; i < kRequests; ++i) ok += http_get(first.port, "/").rfind("HTTP/1.1 200", 0) == 0;
  EXPECT_EQ(ok, kRequests);
}

TEST(PortInUse, ASecondSidecarOnTheFirstsProxyPortExits1NamingTheAddressAndTheFirstServesEveryRequest) {
  Backend backend;
  Sidecar first(SidecarOptions{.user_port = backend.port});
  expect_refused(backend.port, "QUEUE_SERVING_PORT", first.port);
  expect_first_serves_all(first);
  EXPECT_TRUE(first.process->running());
}

TEST(PortInUse, EveryControlListenerRefusesABusyPort) {
  Backend backend;
  Sidecar first(SidecarOptions{.user_port = backend.port, .env = {{"SERVING_REQUEST_METRICS_BACKEND", "prometheus"}}});
  ASSERT_NE(first.user_metrics_port, 0);
  expect_refused(backend.port, "SLUICE_ADMIN_PORT", first.admin_port);
  expect_refused(backend.port, "SLUICE_METRICS_PORT", first.metrics_port);
  expect_refused(backend.port, "SLUICE_USER_METRICS_PORT", first.user_metrics_port,
                 {{"SERVING_REQUEST_METRICS_BACKEND", "prometheus"}});
  EXPECT_EQ(body_of(http_get(first.metrics_port, "/metrics")).empty(), false);
  expect_first_serves_all(first);
}

TEST(PortInUse, TheTlsListenerRefusesABusyPortAndTheFirstKeepsItsTlsPort) {
  Cert cert;
  std::map<std::string, std::string> tls = {{"SLUICE_TLS_CERT_FILE", cert.cert()}, {"SLUICE_TLS_KEY_FILE", cert.key()}};
  Backend backend;
  Sidecar first(SidecarOptions{.user_port = backend.port, .env = tls});
  ASSERT_NE(first.tls_port, 0);
  expect_refused(backend.port, "QUEUE_SERVING_TLS_PORT", first.tls_port, tls);
  constexpr int kRequests = 20;
  int ok = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto r = curl({"-k", "-o", "/dev/null", "-w", "%{http_code}",
                   "https://127.0.0.1:" + std::to_string(first.tls_port) + "/"});
    ok += r.out == "200";
  }
  EXPECT_EQ(ok, kRequests);
}

// The app holds the port without SO_REUSEPORT: refused the same way.
TEST(PortInUse, APortTheAppHoldsIsRefusedToo) {
  Backend backend;
  expect_refused(backend.port, "QUEUE_SERVING_PORT", backend.port);
}

}  // namespace
}  // namespace sluice::test
