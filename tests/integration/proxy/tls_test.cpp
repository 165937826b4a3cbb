// The TLS port with real clients: curl over ALPN h2 and http/1.1, openssl s_client for what the
// handshake shows (serial, protocol versions), certificates made by the openssl tool for each test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/integration/proxy/harness.h"
#include "tests/integration/proxy/raw_app.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class CertDir {
 public:
  CertDir() {
    dir_ = fs::temp_directory_path() / ("sluice-tls-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
  }
  explicit CertDir(int serial) : CertDir() { make(serial); }
  ~CertDir() { fs::remove_all(dir_); }
  // A self-signed pair for localhost with the given serial, written to tls.crt/tls.key by rename, so a
  // reader never sees half a file (as Kubernetes' secret volumes swap a symlink).
  void make(int serial) {
    generate(serial, dir_ / "new.key", dir_ / "new.crt");
    fs::rename(dir_ / "new.key", dir_ / "tls.key");
    fs::rename(dir_ / "new.crt", dir_ / "tls.crt");
  }
  // A certificate and a key that are not a pair: the certificate of a new pair with `serial`, the key
  // of another; written over the current pair as make() writes.
  void make_mismatched(int serial) {
    generate(serial, dir_ / "unused.key", dir_ / "new.crt");
    generate(serial + 1, dir_ / "new.key", dir_ / "unused.crt");
    fs::rename(dir_ / "new.key", dir_ / "tls.key");
    fs::rename(dir_ / "new.crt", dir_ / "tls.crt");
  }
  // A certificate file that is not PEM, written over the current one (the key stays).
  void make_garbage_certificate() {
    std::ofstream(dir_ / "new.crt") << "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
    fs::rename(dir_ / "new.crt", dir_ / "tls.crt");
  }
  std::string cert() const { return (dir_ / "tls.crt").string(); }
  std::string key() const { return (dir_ / "tls.key").string(); }
  const fs::path& path() const { return dir_; }

 private:
  static void generate(int serial, const fs::path& key, const fs::path& crt) {
    auto r = run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key.string(), "-out",
                          crt.string(), "-days", "2", "-subj", "/CN=localhost", "-set_serial", std::to_string(serial)});
    if (r.exit_code != 0) throw std::runtime_error("openssl req failed: " + r.err);
  }
  static inline int counter_ = 0;
  fs::path dir_;
};

std::map<std::string, std::string> tls_env(const CertDir& certs) {
  return {{"SLUICE_TLS_CERT_FILE", certs.cert()}, {"SLUICE_TLS_KEY_FILE", certs.key()}};
}

// A sidecar serving `serial`'s pair and checking the files every 100 ms.
struct ReloadingSidecar {
  explicit ReloadingSidecar(int serial) : certs(serial) {}
  std::map<std::string, std::string> env() const {
    auto e = tls_env(certs);
    e["SLUICE_TLS_RELOAD_MS"] = "100";
    return e;
  }
  CertDir certs;
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = env()}};
};


std::string url(const Sidecar& s, const std::string& path) {
  return "https://127.0.0.1:" + std::to_string(s.tls_port) + path;
}

// The serial of the certificate a fresh handshake shows, e.g. "serial=03E9".
std::string served_serial(const Sidecar& s) {
  auto r = run_command({"sh", "-c", "echo | openssl s_client -connect 127.0.0.1:" + std::to_string(s.tls_port) +
                                        " 2>/dev/null | openssl x509 -noout -serial"});
  return r.out;
}

TEST(Tls, AlpnPicksH2OrHttp11AndTheAppSeesHttps) {
  CertDir certs;
  certs.make(1001);
  Backend backend;
  auto env = tls_env(certs);
  env["SLUICE_FORWARDING_FIELDS"] = "full";  // this hop's proto in Forwarded and X-Forwarded-Proto
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = env}};
  ASSERT_GT(sidecar.tls_port, 0);
  auto h2 = curl({"-k", "--http2", "-w", "%{http_version}", url(sidecar, "/headers")});
  EXPECT_EQ(h2.exit_code, 0) << h2.err;
  EXPECT_TRUE(h2.out.ends_with("\n2")) << h2.out;
  EXPECT_NE(h2.out.find("X-Forwarded-Proto: https\n"), std::string::npos) << h2.out;
  EXPECT_NE(h2.out.find("Forwarded: for=127.0.0.1;proto=https\n"), std::string::npos) << h2.out;
  auto h1 = curl({"-k", "--http1.1", "-w", " %{http_version}", url(sidecar, "/")});
  EXPECT_EQ(h1.out, "Hello from sluice-demo-app\n 1.1");
  auto post = curl({"-k", "--http2", "--data-binary", "hello over tls", url(sidecar, "/echo")});
  EXPECT_EQ(post.out, "hello over tls");
  // The plain port is unchanged beside it.
  EXPECT_EQ(curl({sidecar.url("/")}).out, "Hello from sluice-demo-app\n");
}

std::string lowered(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// RFC 9110 §7.6.1: the fields an app's Connection names, and the connection-specific ones, are for the
// app's connection only. Whatever the client speaks (HTTP/1.1 or h2c on the plain port, HTTP/1.1 or h2
// over TLS) and whatever the app speaks, none reaches the client, and an end-to-end field does. The h2c
// app is a second sluice serving HTTP/2 only in front of the same raw app: HTTP/2 cannot carry these
// fields at all, so over that pair they stop at the first hop that reads HTTP/1.1 (the forwarder's unit
// test holds its policy to every pair with an app side that sends them anyway).
TEST(HopByHop, AResponseFieldNamedInConnectionReachesNoClientWhateverEachSideSpeaks) {
  CertDir certs(1011);
  RawApp app("HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop-Secret\r\nX-Hop-Secret: leak\r\n"
             "Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nX-End-To-End: kept\r\n"
             "Content-Length: 2\r\n\r\nok");
  auto env = tls_env(certs);
  Sidecar to_http1{SidecarOptions{.user_port = app.port(), .env = env}};
  Sidecar h2c_app{SidecarOptions{.user_port = app.port(), .env = {{"SLUICE_PLAIN_PROTOCOLS", "h2c"}}}};
  env["SLUICE_UPSTREAM_PROTOCOL"] = "h2c";
  Sidecar to_h2c{SidecarOptions{.user_port = h2c_app.port, .env = env}};
  for (const Sidecar* sidecar : {&to_http1, &to_h2c}) {
    ASSERT_GT(sidecar->tls_port, 0);
    const std::vector<std::pair<std::string, std::vector<std::string>>> clients = {
        {"HTTP/1.1", {"--http1.1", sidecar->url("/")}},
        {"h2c", {"--http2-prior-knowledge", sidecar->url("/")}},
        {"TLS HTTP/1.1", {"-k", "--http1.1", url(*sidecar, "/")}},
        {"TLS h2", {"-k", "--http2", url(*sidecar, "/")}},
    };
    for (const auto& [name, args] : clients) {
      SCOPED_TRACE(name + (sidecar == &to_h2c ? " to an h2c app" : " to an HTTP/1.1 app"));
      std::vector<std::string> full = {"-D", "-", "-o", "/dev/null", "-w", "%{http_version}"};
      full.insert(full.end(), args.begin(), args.end());
      auto r = curl(full);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto head = lowered(r.out);
      EXPECT_NE(head.find("x-end-to-end: kept"), std::string::npos) << r.out;
      EXPECT_EQ(head.find("x-hop-secret"), std::string::npos) << r.out;
      EXPECT_EQ(head.find("keep-alive"), std::string::npos) << r.out;
      EXPECT_EQ(head.find("proxy-connection"), std::string::npos) << r.out;
      EXPECT_TRUE(r.out.ends_with(name.ends_with("1.1") ? "1.1" : "2")) << "curl spoke " << r.out;
    }
  }
}

// What openssl s_client -msg saw of the records it received: "<<< TLS 1.3, InnerContent" lines are
// followed by the content type of the record, 17 for application data.
std::size_t received_application_records(const std::string& msg) {
  std::size_t n = 0;
  for (auto at = msg.find("<<< TLS 1.3, InnerContent [length 0001]\n    17"); at != std::string::npos;
       at = msg.find("<<< TLS 1.3, InnerContent [length 0001]\n    17", at + 1))
    ++n;
  return n;
}

// An HTTP/1.1 head and a short body are written together: one record, not one per buffer. The end of the
// connection is a close_notify, so the client can tell it from a cut connection.
TEST(Tls, AShortResponseIsOneRecordAndTheCloseIsNotified) {
  CertDir certs;
  certs.make(1009);
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = tls_env(certs)}};
  // -ign_eof: s_client keeps reading after its input ends, until sluice closes the connection.
  auto r = run_command({"sh", "-c", "printf 'GET / HTTP/1.1\\r\\nHost: a\\r\\nConnection: close\\r\\n\\r\\n' | "
                                    "openssl s_client -ign_eof -quiet -msg -alpn http/1.1 -connect 127.0.0.1:" +
                                        std::to_string(sidecar.tls_port) + " 2>&1"},
                       30s);
  EXPECT_NE(r.out.find("Hello from sluice-demo-app"), std::string::npos) << r.out;
  EXPECT_EQ(received_application_records(r.out), 1U) << r.out;
  EXPECT_NE(r.out.find("<<< TLS 1.3, Alert [length 0002], warning close_notify"), std::string::npos) << r.out;
}

TEST(Tls, LargeBodiesStreamBothWaysOverH2) {
  CertDir certs;
  certs.make(1002);
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = tls_env(certs)}};
  auto file = (certs.path() / "body.bin").string();
  ASSERT_EQ(run_command({"sh", "-c", "head -c 20000000 /dev/urandom > " + file}).exit_code, 0);
  auto r = run_command({"sh", "-c", "curl -sS -k --http2 --data-binary @" + file + " " + url(sidecar, "/echo") +
                                        " | cmp - " + file + " && echo same"}, 60s);
  EXPECT_EQ(r.out, "same\n") << r.err;
  auto down = curl({"-k", "--http2", "-o", "/dev/null", "-w", "%{size_download}", url(sidecar, "/bytes/50000000")}, 60);
  EXPECT_EQ(down.out, "50000000");
}

TEST(Tls, ACertificateRotationIsPickedUpWithoutAFailedRequest) {
  ReloadingSidecar s(1003);
  auto& [certs, backend, sidecar] = s;
  ASSERT_EQ(served_serial(sidecar), "serial=03EB\n");
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread client([&] {
    // A new connection per request, so every request makes a handshake; bounded in count.
    for (int i = 0; i < 2000 && !stop; ++i) {
      auto r = curl({"-k", "--http2", url(sidecar, "/")});
      (r.exit_code == 0 && r.out == "Hello from sluice-demo-app\n" ? ok : failed)++;
    }
  });
  ASSERT_TRUE(eventually([&] { return ok >= 5; }, 20s));
  certs.make(2004);
  bool rotated = eventually([&] { return served_serial(sidecar) == "serial=07D4\n"; }, 10s);
  int at_rotation = ok;
  ASSERT_TRUE(eventually([&] { return ok >= at_rotation + 5; }, 20s));
  stop = true;
  client.join();
  EXPECT_TRUE(rotated);
  EXPECT_EQ(failed, 0);
  EXPECT_NE(sidecar.process->stdout_text().find("TLS certificate reloaded"), std::string::npos);
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Tls, ABadOrMismatchedPairWrittenOverAGoodOneKeepsTheOldServingUntilTheNextGoodPair) {
  ReloadingSidecar s(1008);
  auto& [certs, backend, sidecar] = s;
  ASSERT_EQ(served_serial(sidecar), "serial=03F0\n");
  const std::string failure = "TLS reload failed; keeping the current certificate";
  auto failures = [&] { return count_of(sidecar.process->stdout_text(), failure); };
  auto serves = [&] {
    auto r = curl({"-k", "--http2", url(sidecar, "/")});
    return r.exit_code == 0 && r.out == "Hello from sluice-demo-app\n";
  };

  // The certificate of one pair with the key of another: refused, logged naming the key, the old kept.
  certs.make_mismatched(2009);
  ASSERT_TRUE(eventually([&] { return failures() == 1; }, 10s)) << sidecar.process->stdout_text();
  EXPECT_NE(sidecar.process->stdout_text().find(certs.key()), std::string::npos);
  EXPECT_EQ(served_serial(sidecar), "serial=03F0\n");
  EXPECT_TRUE(serves());

  // A certificate that is not one: the same. While the files stay so, no further line (one per change).
  certs.make_garbage_certificate();
  ASSERT_TRUE(eventually([&] { return failures() == 2; }, 10s)) << sidecar.process->stdout_text();
  EXPECT_EQ(served_serial(sidecar), "serial=03F0\n");
  EXPECT_TRUE(serves());

  // The next good pair is picked up; the bad one was logged once, not at each of the checks since.
  certs.make(3010);
  EXPECT_TRUE(eventually([&] { return served_serial(sidecar) == "serial=0BC2\n"; }, 10s));
  EXPECT_TRUE(serves());
  EXPECT_EQ(failures(), 2u);
  EXPECT_NE(sidecar.process->stdout_text().find("TLS certificate reloaded"), std::string::npos);
}

TEST(Tls, Tls13IsTheDefaultMinimumAsQueueProxys) {
  CertDir certs;
  certs.make(1005);
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = tls_env(certs)}};
  EXPECT_NE(curl({"-k", "--tlsv1.2", "--tls-max", "1.2", url(sidecar, "/")}).exit_code, 0);
  EXPECT_EQ(curl({"-k", "--tlsv1.3", url(sidecar, "/")}).out, "Hello from sluice-demo-app\n");
  // The admin port stays plain HTTP (the kubelet's preStop hook calls it so).
  EXPECT_EQ(http_get(sidecar.admin_port, "/nothing-here").rfind("HTTP/1.1 404", 0), 0u);
}

TEST(Tls, MinVersion12AllowsTls12AndSessionsResume) {
  CertDir certs;
  certs.make(1008);
  Backend backend;
  auto env = tls_env(certs);
  env["QUEUE_PROXY_TLS_MIN_VERSION"] = "1.2";
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = env}};
  auto old = run_command({"sh", "-c", "echo | openssl s_client -tls1_1 -connect 127.0.0.1:" +
                                          std::to_string(sidecar.tls_port) + " 2>&1"});
  EXPECT_NE(old.out.find("alert protocol version"), std::string::npos) << old.out;
  EXPECT_EQ(curl({"-k", "--tlsv1.2", "--tls-max", "1.2", url(sidecar, "/")}).exit_code, 0);
  EXPECT_EQ(curl({"-k", "--tlsv1.3", url(sidecar, "/")}).exit_code, 0);
  // Session resumption: a second handshake with the first one's session is abbreviated.
  auto sess = (certs.path() / "session").string();
  auto s_client = "echo | openssl s_client -tls1_2 -connect 127.0.0.1:" + std::to_string(sidecar.tls_port);
  auto first = run_command({"sh", "-c", s_client + " -sess_out " + sess + " 2>/dev/null"});
  EXPECT_NE(first.out.find("\nNew, TLSv1.2"), std::string::npos) << first.out;
  auto again = run_command({"sh", "-c", s_client + " -sess_in " + sess + " 2>/dev/null"});
  EXPECT_NE(again.out.find("\nReused, TLSv1.2"), std::string::npos) << again.out;
}

// openssl s_client's account of one handshake with extra options.
std::string handshake(const Sidecar& s, const std::string& options) {
  return run_command({"sh", "-c", "echo | openssl s_client " + options + " -connect 127.0.0.1:" +
                                      std::to_string(s.tls_port) + " 2>&1"}).out;
}

TEST(Tls, MaxVersionCipherSuitesAndCurvesFollowKnativesVariables) {
  CertDir certs;
  certs.make(1009);
  Backend backend;
  auto env = tls_env(certs);
  env["QUEUE_PROXY_TLS_MIN_VERSION"] = "1.2";
  env["QUEUE_PROXY_TLS_MAX_VERSION"] = "1.2";
  env["QUEUE_PROXY_TLS_CIPHER_SUITES"] = "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256";
  env["QUEUE_PROXY_TLS_CURVE_PREFERENCES"] = "CurveP384";
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = env}};
  EXPECT_NE(curl({"-k", "--tlsv1.3", url(sidecar, "/")}).exit_code, 0);  // above the maximum
  auto chosen = handshake(sidecar, "-tls1_2");
  EXPECT_NE(chosen.find("Cipher is ECDHE-RSA-CHACHA20-POLY1305"), std::string::npos) << chosen;
  EXPECT_NE(chosen.find("Server Temp Key: ECDH, secp384r1"), std::string::npos) << chosen;
  auto other_suite = handshake(sidecar, "-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_EQ(other_suite.find("Cipher is ECDHE-RSA-AES128-GCM-SHA256"), std::string::npos) << other_suite;
  auto other_curve = handshake(sidecar, "-tls1_2 -groups X25519");
  EXPECT_EQ(other_curve.find("Server Temp Key"), std::string::npos) << other_curve;
}

TEST(Tls, ABadTlsVariableStopsStartUpNamingIt) {
  CertDir certs;
  certs.make(1010);
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"QUEUE_PROXY_TLS_MIN_VERSION", "1.0"},
           {"QUEUE_PROXY_TLS_CIPHER_SUITES", "RC4"},
           {"QUEUE_PROXY_TLS_CURVE_PREFERENCES", "brainpoolP256r1"}}) {
    auto env = knative_env(8080);
    env["SLUICE_TLS_CERT_FILE"] = certs.cert();
    env["SLUICE_TLS_KEY_FILE"] = certs.key();
    env[name] = value;
    std::vector<std::string> argv = {"env"};
    for (const auto& [k, v] : env) argv.push_back(k + "=" + v);
    argv.insert(argv.end(), {SLUICE_BIN, "sidecar"});
    auto r = run_command(argv, 10s);
    EXPECT_EQ(r.exit_code, 2) << name;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
}

TEST(Tls, AMissingOrMismatchedKeyStopsStartUpNamingTheFile) {
  CertDir certs;
  certs.make(1006);
  auto env = knative_env(8080);
  env["SLUICE_TLS_CERT_FILE"] = certs.cert();
  env["SLUICE_TLS_KEY_FILE"] = (certs.path() / "absent.key").string();
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : env) argv.push_back(k + "=" + v);
  argv.insert(argv.end(), {SLUICE_BIN, "sidecar"});
  auto r = run_command(argv, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("TLS key " + (certs.path() / "absent.key").string()), std::string::npos) << r.err;

  CertDir other;
  other.make(1007);
  argv[std::find_if(argv.begin(), argv.end(), [](const auto& a) { return a.starts_with("SLUICE_TLS_KEY_FILE="); }) -
       argv.begin()] = "SLUICE_TLS_KEY_FILE=" + other.key();
  r = run_command(argv, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("TLS key " + other.key() + ": key values mismatch"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sluice::test
