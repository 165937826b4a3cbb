// docs/gateway.md's examples as a user runs them: examples/dev (two services, one calling the other
// by name through the http_proxy the gateway gives it, from Python and from curl; `.env` and an
// env-file whose values reach the app and never the gateway's output, status, metrics or dashboard; an
// edit of the env-file makes a new revision; HTTPS and h2 with a certificate from the local CA).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/gateway/gateway_harness.h"
#include "tests/support/capability.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

// A copy of an examples/ directory, so that a test may edit it.
class ExampleCopy {
 public:
  explicit ExampleCopy(const std::string& name) {
    path_ = fs::temp_directory_path() / ("sluice-example-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::copy(fs::path(SOURCE_DIR) / "examples" / name, path_, fs::copy_options::recursive);
  }
  ~ExampleCopy() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / ("." + name + ".tmp")) << text;
    fs::rename(path_ / ("." + name + ".tmp"), path_ / name);
  }

 private:
  fs::path path_;
};

std::string sha256_prefix(const std::string& text) {
  auto r = run_command({"sh", "-c", "printf %s \"$0\" | sha256sum | cut -c1-12", text});
  return r.out.substr(0, 12);
}

std::string api_answer(const std::string& token) {
  return "{\"service\": \"api\", \"greeting\": \"hello\", \"token_sha256\": \"" + sha256_prefix(token) + "\"}\n";
}

TEST(GatewayExamples, DevServicesCallEachOtherByNameAndTheirEnvFilesStayOutOfEveryOutput) {
  SLUICE_NEED("curl");
  ExampleCopy dir("dev");
  const std::string token = "example-token-7c1f", rotated = "rotated-token-93ab";
  Gateway gw({"--config", dir.path("sluice.yaml"), "--https", "off"});  // HTTPS: the next test
  // web (the default service) calls http://api/ with urllib, and with curl: both reach api, whose
  // environment has .env's GREETING and api.env's API_TOKEN.
  auto python = curl({"-sS", gw.url("/")});
  EXPECT_EQ(python.out, "web called api: " + api_answer(token)) << python.err << gw.process->stdout_text();
  auto with_curl = curl({"-sS", gw.url("/curl")});
  EXPECT_EQ(with_curl.out, "web called api: " + api_answer(token)) << with_curl.err;
  // What web's calls looked like: absolute-form through the gateway, routed to api by its name.
  auto api = gw.service("api");
  EXPECT_EQ(api["requests_total"].to_number<std::int64_t>(), 2) << json::serialize(api);
  // A plain-http call to a host that is no service is refused with the reason, not sent to the default.
  auto outside = curl({"-sS", "-w", "\n%{http_code}", "-x", gw.url(""), "http://nowhere.example/"});
  EXPECT_NE(outside.out.find("'nowhere.example' is not a service of this gateway"), std::string::npos) << outside.out;
  EXPECT_TRUE(outside.out.ends_with("\n502")) << outside.out;

  // Rotating the token in api.env makes a new revision of api (not of web) that has it.
  dir.write("api.env", "API_TOKEN=" + rotated + "\n");
  ASSERT_TRUE(gw.process->wait_for_line("\"revision\":\"api-00002\"", 20s)) << gw.process->stdout_text();
  EXPECT_TRUE(eventually([&] { return curl({"-sS", gw.url("/")}).out == "web called api: " + api_answer(rotated); }, 20s));
  EXPECT_EQ(gw.service("web")["revisions"].as_array().size(), 1u);

  // No value from a file appears anywhere the gateway shows things.
  const std::string shown = gw.process->stdout_text() + body_of(http_get(gw.admin_port, "/.sluice/status")) +
                            body_of(http_get(gw.admin_port, "/metrics")) + body_of(http_get(gw.admin_port, "/"));
  for (const auto& secret : {token, rotated}) EXPECT_EQ(shown.find(secret), std::string::npos) << secret;
}

// The port a listener line of the gateway's log gave, or -1.
int listener_port(Gateway& gw, const std::string& listener) {
  for (const auto& l : gw.process->lines())
    if (l.find("\"listener\":\"" + listener + "\"") != std::string::npos) return static_cast<int>(json_int_field(l, "port"));
  return -1;
}

TEST(GatewayExamples, DevOverHttpsWithTheLocalCaAndHttp2) {
  SLUICE_NEED("curl");
  ExampleCopy dir("dev");
  const auto ca_dir = fs::temp_directory_path() / ("sluice-ca-" + std::to_string(::getpid()));
  fs::remove_all(ca_dir);
  const std::map<std::string, std::string> env = {{"SLUICE_CA_DIR", ca_dir.string()}};
  std::string first_ca;
  {
    Gateway gw({"--config", dir.path("sluice.yaml"), "--https", "0"}, env);
    const int https = listener_port(gw, "https");
    ASSERT_GT(https, 0) << gw.process->stdout_text();
    // Made once, owner-only, and the log says how to trust it.
    EXPECT_TRUE(gw.process->wait_for_line("\"event\":\"https.ca_created\"", 1s)) << gw.process->stdout_text();
    EXPECT_EQ(fs::status(ca_dir).permissions() & fs::perms::all, fs::perms::owner_all);
    EXPECT_EQ(fs::status(ca_dir / "ca-key.pem").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
    const auto ca = (ca_dir / "ca.pem").string();
    const auto at = "web.localhost:" + std::to_string(https);
    auto r = curl({"-sS", "--cacert", ca, "--resolve", at + ":127.0.0.1", "-w", "|%{http_version}", "https://" + at + "/"});
    EXPECT_EQ(r.out, "web called api: " + api_answer("example-token-7c1f") + "|2") << r.err;
    // Every service's host is in the certificate; an unknown name is not.
    const auto api_at = "api.localhost:" + std::to_string(https);
    EXPECT_EQ(curl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca, "--resolve", api_at + ":127.0.0.1",
                    "https://" + api_at + "/"}).out, "200");
    const auto other_at = "other.example:" + std::to_string(https);
    EXPECT_NE(curl({"-sS", "--cacert", ca, "--resolve", other_at + ":127.0.0.1", "https://" + other_at + "/"}).exit_code, 0);
    std::ifstream in(ca);
    first_ca.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    // The next start trusts the same CA and does not make another.
    Gateway gw({"--config", dir.path("sluice.yaml"), "--https", "0"}, env);
    std::ifstream in(ca_dir / "ca.pem");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), first_ca);
    EXPECT_EQ(gw.process->stdout_text().find("https.ca_created"), std::string::npos);
    const auto at = "web.localhost:" + std::to_string(listener_port(gw, "https"));
    EXPECT_EQ(curl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", (ca_dir / "ca.pem").string(), "--resolve",
                    at + ":127.0.0.1", "https://" + at + "/"}).out, "200");
  }
  // A CA key others may read is refused, with the file and what to do.
  fs::permissions(ca_dir / "ca-key.pem", fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  auto refused = run_command({"env", "SLUICE_CA_DIR=" + ca_dir.string(), SLUICE_BIN, "gateway", "--config", dir.path("sluice.yaml"), "--https", "0", "--listen", "127.0.0.1:0",
                              "--admin", "127.0.0.1:0"}, 20s);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE((refused.out + refused.err).find(ca_dir.string() + "/ca-key.pem has mode 0644: others may use it"), std::string::npos)
      << refused.out << refused.err;
  fs::remove_all(ca_dir);
}

}  // namespace
}  // namespace sluice::test
