// Knative Service YAML in the gateway: two revisions of one Service split 80/20 (measured over 1,000
// requests), a tag by header and by host, the subset's fields, and what is outside it (warned, or a
// clear error).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/integration/gateway/gateway_harness.h"

namespace sluice::test {
namespace {

std::string revision_doc(const std::string& revision, const std::string& value, const std::string& extra = "") {
  return "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: hello\n  namespace: default\n"
         "spec:\n  template:\n    metadata:\n      name: " + revision +
         "\n      annotations:\n        autoscaling.knative.dev/max-scale: \"3\"\n    spec:\n"
         "      containerConcurrency: 0\n      timeoutSeconds: 30\n      containers:\n"
         "        - image: example.com/hello:latest\n          command: [\"" + std::string(DEMO_APP_BIN) + "\"]\n"
         "          env:\n            - name: V\n              value: " + value + "\n"
         "          ports:\n            - containerPort: 8080\n          readinessProbe:\n            httpGet:\n"
         "              path: /\n" + extra;
}

std::string split_file(int v1_percent = 80) {
  return revision_doc("hello-v1", "one") + "---\n" +
         revision_doc("hello-v2", "two",
                      "  traffic:\n    - revisionName: hello-v1\n      percent: " + std::to_string(v1_percent) +
                          "\n    - latestRevision: true\n      percent: " + std::to_string(100 - v1_percent) +
                          "\n      tag: canary\n");
}

// `n` requests on one curl (keep-alive), the bodies counted.
std::map<std::string, int> bodies(Gateway& gw, int n, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"-s"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (int i = 0; i < n; ++i) args.push_back(gw.url("/env/V"));
  auto r = curl(args, 120);
  std::map<std::string, int> count;
  std::size_t at = 0;
  for (auto nl = r.out.find('\n'); nl != std::string::npos; at = nl + 1, nl = r.out.find('\n', at))
    ++count[r.out.substr(at, nl - at)];
  return count;
}

TEST(GatewayKnative, TwoRevisionsSplit80To20) {
  TempFile file("sluice-kn.yaml", split_file());
  Gateway gw({"--config", file.path()});
  auto count = bodies(gw, 1000);
  EXPECT_EQ(count["one"] + count["two"], 1000) << count.size();
  EXPECT_NEAR(count["one"], 800, 50) << "one " << count["one"] << ", two " << count["two"];
  EXPECT_NEAR(count["two"], 200, 50) << "one " << count["one"] << ", two " << count["two"];
  auto revisions = gw.service("hello")["revisions"].as_array();
  ASSERT_EQ(revisions.size(), 2u) << json::serialize(revisions);
  EXPECT_EQ(revisions[0].as_object()["name"].as_string(), "hello-v1");
  EXPECT_EQ(revisions[0].as_object()["traffic_percent"].as_int64(), 80);
  EXPECT_EQ(revisions[1].as_object()["traffic_percent"].as_int64(), 20);
}

// The split edited in the file while requests flow (h2load, four connections, each request 15 ms at the
// app): no request fails, and the shares move to the new split.
TEST(GatewayKnative, ASplitChangedUnderLoadMovesTheSharesWithoutAFailedRequest) {
  TempFile file("sluice-kn.yaml", split_file(80));
  Gateway gw({"--config", file.path()});
  auto before = bodies(gw, 500);
  EXPECT_NEAR(before["one"], 400, 40) << "one " << before["one"] << ", two " << before["two"];
  const auto served = gw.number("requests_total", "hello");
  CommandResult load;
  std::atomic<bool> done{false};
  std::thread t([&] {
    load = run_command({"h2load", "--h1", "-n1000", "-c4", gw.url("/delay/15")}, 90s);
    done = true;
  });
  ASSERT_TRUE(eventually([&] { return gw.number("requests_total", "hello") > served + 20; }, 20s));
  {  // replaced as an editor does: a new file renamed over the old
    std::ofstream(file.path() + ".new") << split_file(20);
    std::filesystem::rename(file.path() + ".new", file.path());
  }
  auto changed = gw.process->wait_for_line("\"event\":\"traffic.changed\"", 20s);
  EXPECT_TRUE(changed) << gw.process->stdout_text();
  EXPECT_FALSE(done) << "the split changed only after the load had ended";
  t.join();
  EXPECT_EQ(h2load_count(load.out, "succeeded"), 1000) << load.out;
  EXPECT_EQ(h2load_count(load.out, "2xx"), 1000) << load.out;
  auto after = bodies(gw, 1000);
  EXPECT_EQ(after["one"] + after["two"], 1000);
  EXPECT_NEAR(after["one"], 200, 50) << "one " << after["one"] << ", two " << after["two"];
  auto revisions = gw.service("hello")["revisions"].as_array();
  ASSERT_EQ(revisions.size(), 2u) << json::serialize(revisions);
  EXPECT_EQ(revisions[0].as_object()["traffic_percent"].as_int64(), 20);
  EXPECT_EQ(revisions[1].as_object()["traffic_percent"].as_int64(), 80);
}

void replace_file(const TempFile& file, const std::string& text) {  // as an editor does: a new file renamed over
  std::ofstream(file.path() + ".new") << text;
  std::filesystem::rename(file.path() + ".new", file.path());
}

// What /metrics says of a service: the sum of a family's samples over its revisions.
double metric_sum(Gateway& gw, const std::string& family, const std::string& service) {
  auto text = body_of(http_get(gw.admin_port, "/metrics"));
  double sum = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(family + "{") && line.find("service=\"" + service + "\"") != std::string::npos)
      sum += std::stod(line.substr(line.rfind(' ') + 1));
  return sum;
}

// The split is added to the running file in two edits (a second document, then its traffic), the first
// of which retired hello-v1: the live edit serves as a fresh start with the same file does (both
// revisions, 50/50), and the service's numbers in status are every revision's (as /metrics has them).
TEST(GatewayKnative, ASplitAddedToTheRunningFileServesAsAFreshStartWithItAndStatusCountsEveryRevision) {
  TempFile file("sluice-kn.yaml", revision_doc("hello-v1", "one"));
  Gateway gw({"--config", file.path()});
  EXPECT_EQ(bodies(gw, 10)["one"], 10);
  replace_file(file, revision_doc("hello-v1", "one") + "---\n" + revision_doc("hello-v2", "two"));
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"revision.serving\",\"service\":\"hello\",\"revision\":\"hello-v2\"", 20s))
      << gw.process->stdout_text();
  EXPECT_EQ(bodies(gw, 10)["two"], 10);
  replace_file(file, split_file(50));
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"traffic.changed\"", 20s)) << gw.process->stdout_text();
  auto live = bodies(gw, 400);
  EXPECT_EQ(live["one"] + live["two"], 400);
  EXPECT_NEAR(live["one"], 200, 50) << "one " << live["one"] << ", two " << live["two"];
  EXPECT_EQ(gw.process->stdout_text().find("traffic.unknown_revision"), std::string::npos) << gw.process->stdout_text();
  // The command line's --listen/--admin/--workers are not mistaken for a change of the file's.
  EXPECT_EQ(gw.process->stdout_text().find("config.restart_needed"), std::string::npos) << gw.process->stdout_text();

  // Every revision's requests and cold starts (each revision started from zero at least once).
  ASSERT_TRUE(eventually([&] { return gw.number("requests_total", "hello") == 420; }, 5s))
      << json::serialize(gw.service("hello"));
  EXPECT_EQ(metric_sum(gw, "sluice_requests_total", "hello"), 420);
  EXPECT_EQ(static_cast<double>(gw.number("cold_starts", "hello")), metric_sum(gw, "sluice_cold_starts_total", "hello"));
  EXPECT_GE(gw.number("cold_starts", "hello"), 2);

  Gateway fresh({"--config", file.path()});
  auto shares = [](Gateway& g) {
    std::map<std::string, std::int64_t> out;
    auto service = g.service("hello");  // named: a range-for over a temporary's member would dangle
    for (auto& r : service["revisions"].as_array())
      if (r.as_object()["phase"].as_string() == "serving")
        out[std::string(r.as_object()["name"].as_string())] = r.as_object()["traffic_percent"].as_int64();
    return out;
  };
  EXPECT_EQ(shares(gw), shares(fresh));
  EXPECT_EQ(shares(gw), (std::map<std::string, std::int64_t>{{"hello-v1", 50}, {"hello-v2", 50}}));
}

TEST(GatewayKnative, ATagPicksItsRevisionByHeaderAndByHost) {
  TempFile file("sluice-kn.yaml", split_file());
  Gateway gw({"--config", file.path()});
  auto by_header = bodies(gw, 50, {"-H", "Knative-Serving-Tag: canary"});
  EXPECT_EQ(by_header["two"], 50) << by_header["one"];
  auto by_host = bodies(gw, 50, {"-H", "Host: canary-hello.localhost"});
  EXPECT_EQ(by_host["two"], 50) << by_host["one"];
  EXPECT_EQ(curl({"-H", "Knative-Serving-Tag: canary", gw.url("/env/K_REVISION")}).out, "hello-v2\n");
  // An unknown tag gets the split, as in Knative.
  auto unknown = bodies(gw, 50, {"-H", "Knative-Serving-Tag: nope"});
  EXPECT_EQ(unknown["one"] + unknown["two"], 50);
}

// The container names an image that is not on this machine and a command: the command runs here, and the
// log says so once (image_test.cpp runs images that are here).
TEST(GatewayKnative, FieldsOutsideTheSubsetAreWarnedAboutOnceAndAnAbsentImageFallsBackToTheCommand) {
  TempFile file("sluice-kn.yaml", revision_doc("hello-00001", "one"));
  Gateway gw({"--config", file.path()});
  std::size_t namespace_warnings = 0;
  for (const auto& l : gw.process->lines()) namespace_warnings += l.find("metadata.namespace: ignored") != std::string::npos;
  EXPECT_EQ(namespace_warnings, 1u) << gw.process->stdout_text();
  EXPECT_EQ(curl({gw.url("/env/K_REVISION")}).out, "hello-00001\n");
  EXPECT_EQ(curl({gw.url("/env/K_SERVICE")}).out, "hello\n");
  auto fallbacks = [&] {
    std::size_t n = 0;
    for (const auto& l : gw.process->lines()) n += l.find("\"event\":\"image.fallback\"") != std::string::npos;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return fallbacks() > 0; }, 5s)) << gw.process->stdout_text();
  EXPECT_EQ(fallbacks(), 1u) << gw.process->stdout_text();
}

// An image alone is valid config (whether it is here is found at its first start: image_test.cpp).
TEST(GatewayKnative, ABadSplitIsAClearErrorAndAnImageAloneIsNot) {
  std::string doc = "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  template:\n"
                    "    spec:\n      containers:\n        - image: nginx\n  traffic:\n    - latestRevision: true\n"
                    "      percent: 90\n";
  TempFile file("sluice-kn.yaml", doc);
  auto r = run_command({SLUICE_BIN, "gateway", "--check", file.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("containers[0]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(":11: document 1.spec.traffic: percents add up to 90, not 100"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sluice::test
