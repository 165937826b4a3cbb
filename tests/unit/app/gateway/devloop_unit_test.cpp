// Pieces of the gateway's dev loop alone: watch globs, the status JSON's numbers, Knative Service
// documents, the metadata server's answers.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "app/gateway/config.h"
#include "app/gateway/json_text.h"
#include "app/gateway/metadata.h"
#include "app/gateway/watcher.h"
#include "common/config_error.h"

namespace sluice::app::gateway {
namespace {

TEST(GatewayWatchGlobs, StarStaysInANameAndDoubleStarCrossesDirectories) {
  EXPECT_TRUE(Watcher::matches("*.py", "app.py"));
  EXPECT_TRUE(Watcher::matches("src/**/*.go", "src/a/b/main.go"));
  EXPECT_TRUE(Watcher::matches("src/**/*.go", "src/main.go"));
  EXPECT_FALSE(Watcher::matches("src/**/*.go", "test/main.go"));
  EXPECT_FALSE(Watcher::matches("*.py", "app.pyc"));
  EXPECT_TRUE(Watcher::matches("templates/*", "templates/index.html"));
}

TEST(GatewayJsonText, NumbersArePlain) {
  boost::json::object o{{"zero", 0.0}, {"half", 0.5}, {"ms", 12.345678}, {"n", 3}, {"big", 1e6}, {"s", "a\"b"}};
  EXPECT_EQ(json_text(o), R"({"zero":0,"half":0.5,"ms":12.346,"n":3,"big":1000000,"s":"a\"b"})");
}

const char* kTwoRevisions = R"(apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: hello}
spec:
  template:
    metadata: {name: hello-v1}
    spec:
      containers: [{command: [./server], env: [{name: V, value: one}]}]
---
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: hello, labels: {team: a}}
spec:
  template:
    metadata:
      annotations: {autoscaling.knative.dev/max-scale: "4", autoscaling.knative.dev/window: 30s}
    spec:
      containerConcurrency: 2
      timeoutSeconds: 10
      containers:
        - command: [./server]
          args: [--v2]
          ports: [{name: h2c, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /ready}}
  traffic:
    - {revisionName: hello-v1, percent: 70}
    - {latestRevision: true, percent: 30, tag: next}
)";

TEST(GatewayKnativeYaml, SeveralDocumentsOfOneServiceAreItsRevisions) {
  ASSERT_TRUE(is_knative(kTwoRevisions));
  auto g = parse_knative(kTwoRevisions, "svc.yaml");
  ASSERT_EQ(g.services.size(), 1u);
  const auto& s = g.services[0];
  EXPECT_EQ(s.name, "hello");
  ASSERT_EQ(s.earlier.size(), 1u);
  EXPECT_EQ(s.earlier[0].revision_name, "hello-v1");
  EXPECT_EQ(s.earlier[0].env.at("V"), "one");
  EXPECT_EQ(s.command, (std::vector<std::string>{"./server", "--v2"}));
  EXPECT_EQ(s.scaling.max_scale, 4);
  EXPECT_EQ(s.scaling.container_concurrency, 2);
  EXPECT_EQ(s.scaling.stable_window, std::chrono::seconds(30));
  EXPECT_EQ(s.request_timeout, std::chrono::seconds(10));
  EXPECT_EQ(s.readiness_path, "/ready");
  EXPECT_TRUE(h2c_upstream_on(g, s));
  ASSERT_EQ(s.traffic.size(), 2u);
  EXPECT_EQ(s.traffic[0], (TrafficTarget{"hello-v1", 70, ""}));
  EXPECT_EQ(s.traffic[1], (TrafficTarget{"", 30, "next"}));
  ASSERT_EQ(g.warnings.size(), 1u);
  EXPECT_NE(g.warnings[0].find("svc.yaml:12: document 2.metadata.labels: ignored"), std::string::npos) << g.warnings[0];
}

TEST(GatewayKnativeYaml, ATrafficChangeAloneKeepsTheRevisionsFingerprint) {
  std::string moved = kTwoRevisions;
  moved.replace(moved.find("percent: 70"), 11, "percent: 50").replace(moved.find("percent: 30"), 11, "percent: 50");
  auto a = parse_knative(kTwoRevisions, "svc.yaml"), b = parse_knative(moved, "svc.yaml");
  EXPECT_EQ(a.services[0].fingerprint, b.services[0].fingerprint);
  EXPECT_NE(a.services[0].traffic, b.services[0].traffic);
}

TEST(GatewayKnativeYaml, ErrorsNameTheDocumentAndLine) {
  try {
    (void)parse_knative("apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: x}\nspec:\n  template:\n"
                        "    metadata: {annotations: {autoscaling.knative.dev/min-scale: lots}}\n"
                        "    spec: {containers: [{command: [a], env: [{name: A, valueFrom: {secretKeyRef: {}}}]}]}\n",
                        "x.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("x.yaml:6: document 1.annotations: min-scale"), std::string::npos) << what;
    EXPECT_NE(what.find("valueFrom: secrets and config maps do not exist here"), std::string::npos) << what;
  }
}

net::ControlRequest request(const std::string& target, bool flavor) {
  net::ControlRequest r{boost::beast::http::verb::get, target, 11};
  if (flavor) r.set("Metadata-Flavor", "Google");
  return r;
}

TEST(GatewayMetadataAnswers, HeaderRequiredAndTheCallersIdentity) {
  EXPECT_EQ(metadata_answer(request("/computeMetadata/v1/project/project-id", false), {}).status, 403u);
  auto ok = metadata_answer(request("/computeMetadata/v1/project/project-id", true), {});
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.body, "local");
  MetadataCaller me{"web-3", "web", "web-00002"};
  EXPECT_EQ(metadata_answer(request("/computeMetadata/v1/instance/id", true), me).body, "web-3");
  EXPECT_EQ(metadata_answer(request("/computeMetadata/v1/instance/attributes/revision", true), me).body, "web-00002");
  EXPECT_EQ(metadata_answer(request("/computeMetadata/v1/instance/id", true), {}).status, 404u);
  EXPECT_EQ(metadata_answer(request("/computeMetadata/v1/nothing", true), me).status, 404u);
}

}  // namespace
}  // namespace sluice::app::gateway
