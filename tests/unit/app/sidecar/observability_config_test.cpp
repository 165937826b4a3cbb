// OBSERVABILITY_CONFIG and the v1.12 tracing variables: what the sidecar exports, where, and how often.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "app/sidecar/observability_config.h"
#include "app/sidecar/config.h"
#include "common/config_error.h"

namespace sluice::app {
namespace {

using proxy::telemetry::ExportProtocol;

std::map<std::string, std::string> required() {
  return {{"CONTAINER_CONCURRENCY", "0"},     {"QUEUE_SERVING_PORT", "8012"},  {"QUEUE_SERVING_TLS_PORT", "8112"},
          {"USER_PORT", "8080"},              {"REVISION_TIMEOUT_SECONDS", "300"}, {"SERVING_NAMESPACE", "ns"},
          {"SERVING_CONFIGURATION", "cfg"},   {"SERVING_REVISION", "cfg-00001"}, {"SERVING_POD", "cfg-00001-pod"},
          {"SERVING_POD_IP", "10.0.0.7"},     {"SERVING_LOGGING_CONFIG", ""},  {"SERVING_LOGGING_LEVEL", "info"}};
}

SidecarConfig parse(std::map<std::string, std::string> extra) {
  auto env = required();
  for (auto& [k, v] : extra) env[k] = v;
  return parse_sidecar_config(
      [env](std::string_view k) -> std::optional<std::string> {
        auto it = env.find(std::string(k));
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      {});
}

std::string observability_error(std::map<std::string, std::string> extra) {
  try {
    parse(std::move(extra));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string attribute(const proxy::telemetry::Attributes& a, const std::string& key) {
  for (const auto& [k, v] : a)
    if (k == key) return v;
  return "<absent>";
}

TEST(ObservabilityConfig, EndpointsAsKnativeReadsThem) {
  auto e = parse_endpoint("x", "http://collector.obs:4318/custom/traces", "/v1/traces");
  EXPECT_FALSE(e.tls);
  EXPECT_EQ(e.host, "collector.obs");
  EXPECT_EQ(e.port, 4318);
  EXPECT_EQ(e.path, "/custom/traces");
  EXPECT_EQ(parse_endpoint("x", "http://c:4318", "/v1/traces").path, "/v1/traces");
  EXPECT_EQ(parse_endpoint("x", "http://c", "/v1/traces").port, 80);
  auto v6 = parse_endpoint("x", "http://[::1]:4317", "/");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 4317);
  EXPECT_TRUE(parse_endpoint("x", "collector:4317", "/").tls);  // no scheme: https, as Knative
  // Go's url.Parse refuses a scheme-less address that does not start with a letter.
  for (const char* bad : {"ftp://c:1", "http://:4317", "http://c:99999", "http://c:12ab", "http://[::1:4317",
                          "127.0.0.1:4318", "[::1]:4317"})
    EXPECT_THROW(parse_endpoint("x", bad, "/"), ConfigError) << bad;
}

TEST(ObservabilityConfig, NewStyleTracingAndMetricsPush) {
  auto c = parse({{"OBSERVABILITY_CONFIG",
                   R"({"tracing":{"protocol":"grpc","endpoint":"http://otel:4317","samplingRate":0.25},)"
                   R"("requestMetrics":{"protocol":"http/protobuf","endpoint":"http://otel:4318","exportInterval":30000000000}})"},
                  {"SERVING_SERVICE", "svc"}});
  EXPECT_EQ(c.tracing.protocol, ExportProtocol::otlp_grpc);
  EXPECT_EQ(c.tracing.endpoint.host, "otel");
  EXPECT_DOUBLE_EQ(c.tracing.sampling_rate, 0.25);
  EXPECT_EQ(c.metrics_push.protocol, ExportProtocol::otlp_http);
  EXPECT_EQ(c.metrics_push.endpoint.path, "/v1/metrics");
  EXPECT_EQ(c.metrics_push.interval, std::chrono::seconds(30));
  EXPECT_FALSE(c.user_metrics);  // not prometheus: nothing on :9091
  // Knative's resource attributes; service.name falls back to SERVING_SERVICE.
  EXPECT_EQ(c.tracing.service_name, "svc");
  EXPECT_EQ(attribute(c.tracing.resource, "kn.service.name"), "svc");
  EXPECT_EQ(attribute(c.tracing.resource, "kn.configuration.name"), "cfg");
  EXPECT_EQ(attribute(c.tracing.resource, "kn.revision.name"), "cfg-00001");
  EXPECT_EQ(attribute(c.tracing.resource, "k8s.namespace.name"), "ns");
  EXPECT_EQ(attribute(c.tracing.resource, "k8s.pod.name"), "cfg-00001-pod");
  EXPECT_EQ(attribute(c.tracing.resource, "container.name"), "queue-proxy");  // semconv's, as Knative writes it
  EXPECT_EQ(attribute(c.tracing.resource, "k8s.container.name"), "<absent>");
  EXPECT_EQ(attribute(c.tracing.resource, "service.instance.id"), "cfg-00001-pod");
  EXPECT_EQ(attribute(c.metrics_push.resource, "service.name"), "svc");
  EXPECT_EQ(c.metrics_push.resource, c.tracing.resource);
  // Sorted by key, as OpenTelemetry Go's attribute set keeps a resource.
  EXPECT_TRUE(std::is_sorted(c.tracing.resource.begin(), c.tracing.resource.end()));
}

TEST(ObservabilityConfig, ResourceTakesOtelResourceAttributesUnderKnativesOwn) {
  auto c = parse({{"OTEL_RESOURCE_ATTRIBUTES", " deployment.environment = prod%20eu ,k8s.pod.name=mine,broken,"
                                               "team=a%zzb,service.name=env"}});
  EXPECT_EQ(attribute(c.tracing.resource, "deployment.environment"), "prod eu");  // trimmed, unescaped
  EXPECT_EQ(attribute(c.tracing.resource, "team"), "a%zzb");                       // a bad escape: as written
  EXPECT_EQ(attribute(c.tracing.resource, "broken"), "<absent>");                  // no "=": skipped
  EXPECT_EQ(attribute(c.tracing.resource, "k8s.pod.name"), "cfg-00001-pod");       // Knative's win
  EXPECT_EQ(attribute(c.tracing.resource, "service.name"), "cfg");
  EXPECT_EQ(attribute(c.tracing.resource, "telemetry.sdk.name"), "sluice");
}

TEST(ObservabilityConfig, StdoutTracingSamplesEverything) {
  auto c = parse({{"OBSERVABILITY_CONFIG", R"({"tracing":{"protocol":"stdout","samplingRate":0.1}})"}});
  EXPECT_EQ(c.tracing.protocol, ExportProtocol::stdout_json);
  EXPECT_DOUBLE_EQ(c.tracing.sampling_rate, 1);  // knative.dev/pkg: AlwaysSample for stdout
  EXPECT_FALSE(c.tracing.b3_parents);
  EXPECT_TRUE(c.not_acted_on.empty());
}

TEST(ObservabilityConfig, ServiceNameFallsBackAsQueueProxys) {
  EXPECT_EQ(parse({{"OTEL_SERVICE_NAME", "mine"}, {"SERVING_SERVICE", "svc"}}).tracing.service_name, "mine");
  EXPECT_EQ(parse({}).tracing.service_name, "cfg");  // no SERVING_SERVICE: the configuration
  auto c = parse({{"SERVING_CONFIGURATION", ""}});
  EXPECT_EQ(c.tracing.service_name, "cfg-00001");
  EXPECT_EQ(attribute(c.tracing.resource, "kn.configuration.name"), "<absent>");
}

TEST(ObservabilityConfig, OldStyleZipkinAndItsDefaults) {
  auto c = parse({{"TRACING_CONFIG_BACKEND", "zipkin"},
                  {"TRACING_CONFIG_ZIPKIN_ENDPOINT", "http://zipkin.istio-system:9411/api/v2/spans"}});
  EXPECT_EQ(c.tracing.protocol, ExportProtocol::zipkin);
  EXPECT_EQ(c.tracing.endpoint.port, 9411);
  EXPECT_DOUBLE_EQ(c.tracing.sampling_rate, 0.1);  // knative.dev/pkg's default
  EXPECT_TRUE(c.tracing.b3_parents);
  c = parse({{"TRACING_CONFIG_BACKEND", "zipkin"}, {"TRACING_CONFIG_ZIPKIN_ENDPOINT", "http://z:9411"},
             {"TRACING_CONFIG_SAMPLE_RATE", "0.3"}, {"TRACING_CONFIG_DEBUG", "true"}});
  EXPECT_DOUBLE_EQ(c.tracing.sampling_rate, 1);  // debug samples everything
  EXPECT_EQ(parse({{"TRACING_CONFIG_BACKEND", "none"}}).tracing.protocol, ExportProtocol::none);
  EXPECT_NE(observability_error({{"TRACING_CONFIG_BACKEND", "zipkin"}}).find("TRACING_CONFIG_ZIPKIN_ENDPOINT"), std::string::npos);
}

// An https:// endpoint, or a scheme-less one (which Knative reads as https), is exported to over TLS.
TEST(ObservabilityConfig, TlsEndpointsAreUsed) {
  auto c = parse({{"OBSERVABILITY_CONFIG", R"({"tracing":{"protocol":"grpc","endpoint":"otel:4317","samplingRate":1},)"
                                           R"("requestMetrics":{"protocol":"http/protobuf","endpoint":"https://m"}})"}});
  EXPECT_EQ(c.tracing.protocol, ExportProtocol::otlp_grpc);
  EXPECT_TRUE(c.tracing.endpoint.tls);
  EXPECT_EQ(c.metrics_push.protocol, ExportProtocol::otlp_http);
  EXPECT_TRUE(c.metrics_push.endpoint.tls);
  EXPECT_EQ(c.metrics_push.endpoint.port, 443);
  EXPECT_EQ(c.metrics_push.endpoint.path, "/v1/metrics");
  EXPECT_TRUE(c.not_acted_on.empty());
  c = parse({{"TRACING_CONFIG_BACKEND", "zipkin"}, {"TRACING_CONFIG_ZIPKIN_ENDPOINT", "https://z:9411/api/v2/spans"}});
  EXPECT_EQ(c.tracing.protocol, ExportProtocol::zipkin);
  EXPECT_TRUE(c.tracing.endpoint.tls);
  EXPECT_TRUE(c.not_acted_on.empty());
}

TEST(ObservabilityConfig, KnativesValidationNamesTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"tracing":{"protocol":"zipkin"}})", "tracing.protocol"},
      {R"({"tracing":{"protocol":"none","endpoint":"http://x:1"}})", "tracing.endpoint"},
      {R"({"tracing":{"protocol":"grpc","endpoint":"http://x:1","samplingRate":-0.1}})", "tracing.samplingRate"},
      {R"({"tracing":{"protocol":"grpc","endpoint":"http://x:1","samplingRate":"high"}})", "tracing.samplingRate"},
      {R"({"tracing":"grpc"})", "tracing must be an object"},
      {R"({"requestMetrics":{"protocol":"none","endpoint":"http://x:1"}})", "requestMetrics.endpoint"},
      {R"({"enableRequestLog":"yes"})", "enableRequestLog"},
  };
  for (const auto& [json, key] : bad) {
    auto err = observability_error({{"OBSERVABILITY_CONFIG", json}});
    EXPECT_NE(err.find(key), std::string::npos) << json << " gave: " << err;
    EXPECT_NE(err.find("OBSERVABILITY_CONFIG"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace sluice::app
