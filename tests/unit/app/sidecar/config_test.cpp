#include "app/sidecar/config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/config_error.h"

namespace sluice::app {
namespace {

const std::map<std::string, std::string> kRequired = {
    {"CONTAINER_CONCURRENCY", "10"},   {"QUEUE_SERVING_PORT", "8012"},
    {"QUEUE_SERVING_TLS_PORT", "8112"}, {"USER_PORT", "8080"},
    {"REVISION_TIMEOUT_SECONDS", "300"}, {"SERVING_NAMESPACE", "default"},
    {"SERVING_CONFIGURATION", "hello"}, {"SERVING_REVISION", "hello-00001"},
    {"SERVING_POD", "hello-00001-deployment-abc"}, {"SERVING_POD_IP", "10.0.0.7"},
    {"SERVING_LOGGING_CONFIG", ""},    {"SERVING_LOGGING_LEVEL", "info"},
};

EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m = std::move(m)](std::string_view k) -> std::optional<std::string> {
    auto it = m.find(std::string(k));
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

std::string sidecar_error(std::map<std::string, std::string> env, std::vector<std::string_view> flags = {}) {
  try {
    parse_sidecar_config(env_of(std::move(env)), flags);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SidecarConfig, ReadsKnativeVariables) {
  auto c = parse_sidecar_config(env_of(kRequired), {});
  EXPECT_EQ(c.container_concurrency, 10);
  EXPECT_EQ(c.proxy.port, 8012);
  EXPECT_EQ(c.tls_port, 8112);
  EXPECT_EQ(c.proxy.upstream_port, 8080);
  EXPECT_EQ(c.proxy.upstream_host, "127.0.0.1");
  EXPECT_EQ(c.proxy.timeouts.request, std::chrono::seconds(300));
  EXPECT_EQ(c.proxy.timeouts.response_start.count(), 0);
  EXPECT_EQ(c.revision, "hello-00001");
  EXPECT_EQ(c.pod_ip, "10.0.0.7");
  EXPECT_EQ(c.proxy.upstream_max_idle, 10u);  // = container concurrency, as queue-proxy
  EXPECT_EQ(c.proxy.timeouts.upstream_idle, std::chrono::seconds(90));  // Go's http.Transport's, as queue-proxy
  EXPECT_FALSE(c.proxy.request_log);
}

TEST(SidecarConfig, UpstreamIdleTimeoutIsSecondsAndZeroKeepsConnections) {
  auto env = kRequired;
  env["SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS"] = "5";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.timeouts.upstream_idle, std::chrono::seconds(5));
  env["SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS"] = "0";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.timeouts.upstream_idle.count(), 0);
  env["SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS"] = "-1";
  auto err = sidecar_error(env);
  EXPECT_NE(err.find("SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS"), std::string::npos) << err;
}

TEST(SidecarConfig, EachMissingRequiredVariableIsNamed) {
  for (const auto& [name, value] : kRequired) {
    auto env = kRequired;
    env.erase(name);
    auto err = sidecar_error(env);
    EXPECT_NE(err.find(name), std::string::npos) << "missing " << name << " gave: " << err;
  }
}

TEST(SidecarConfig, AllMissingVariablesAreNamedAtOnce) {
  auto err = sidecar_error({});
  for (const auto& [name, value] : kRequired) EXPECT_NE(err.find(name), std::string::npos) << name;
}

TEST(SidecarConfig, EmptyLoggingConfigIsAllowed) {
  EXPECT_EQ(sidecar_error(kRequired), "");
}

TEST(SidecarConfig, MalformedValuesNameTheVariableAndTheValue) {
  struct Case { std::string var, value; };
  for (const auto& c : std::vector<Case>{{"CONTAINER_CONCURRENCY", "ten"},
                                         {"CONTAINER_CONCURRENCY", ""},
                                         {"QUEUE_SERVING_PORT", "70000"},
                                         {"ENABLE_HTTP_FULL_DUPLEX", ""},
                                         {"REVISION_TIMEOUT_SECONDS", "5s"},
                                         {"SERVING_ENABLE_REQUEST_LOG", "yes please"},
                                         {"REVISION_IDLE_TIMEOUT_SECONDS", "x"}}) {
    auto env = kRequired;
    env[c.var] = c.value;
    auto err = sidecar_error(env);
    EXPECT_NE(err.find(c.var), std::string::npos) << c.var << "=" << c.value << " gave: " << err;
    EXPECT_NE(err.find(c.value), std::string::npos) << c.var << "=" << c.value << " gave: " << err;
  }
}

TEST(SidecarConfig, FlagsWinOverEnvironment) {
  auto c = parse_sidecar_config(env_of(kRequired), std::vector<std::string_view>{
                                                       "--user-port=9000", "--workers", "3"});
  EXPECT_EQ(c.proxy.upstream_port, 9000);
  EXPECT_EQ(c.proxy.workers, 3u);
}

TEST(SidecarConfig, FlagsCanSupplyRequiredValues) {
  auto env = kRequired;
  env.erase("USER_PORT");
  auto c = parse_sidecar_config(env_of(env), std::vector<std::string_view>{"--user-port", "9100"});
  EXPECT_EQ(c.proxy.upstream_port, 9100);
}

TEST(SidecarConfig, MalformedFlagNamesTheFlag) {
  auto err = sidecar_error(kRequired, {"--max-header-bytes=lots"});
  EXPECT_NE(err.find("--max-header-bytes"), std::string::npos) << err;
  err = sidecar_error(kRequired, {"--no-such-flag=1"});
  EXPECT_NE(err.find("--no-such-flag"), std::string::npos) << err;
}

TEST(SidecarConfig, LimitsAndTimeoutsAreConfigurable) {
  auto env = kRequired;
  env["SLUICE_MAX_HEADER_BYTES"] = "4096";
  env["SLUICE_MAX_HEADER_COUNT"] = "20";
  env["SLUICE_MAX_BODY_BYTES"] = "1000";
  env["SLUICE_MAX_CONNECTIONS"] = "50";
  env["SLUICE_LINGER_MS"] = "250";
  env["SLUICE_LINGER_BYTES"] = "4096";
  env["REVISION_RESPONSE_START_TIMEOUT_SECONDS"] = "7";
  env["REVISION_IDLE_TIMEOUT_SECONDS"] = "9";
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.proxy.limits.max_header_bytes, 4096u);
  EXPECT_EQ(c.proxy.limits.max_header_count, 20u);
  EXPECT_EQ(c.proxy.limits.max_body_bytes, 1000u);
  EXPECT_EQ(c.proxy.limits.max_connections, 50u);
  EXPECT_EQ(c.proxy.limits.linger, std::chrono::milliseconds(250));
  EXPECT_EQ(c.proxy.limits.linger_bytes, 4096u);
  EXPECT_EQ(c.proxy.timeouts.response_start, std::chrono::seconds(7));
  EXPECT_EQ(c.proxy.timeouts.idle, std::chrono::seconds(9));
}

TEST(SidecarConfig, UpstreamProtocolFollowsKnativesSignals) {
  using Upstream = proxy::ProxyConfig::UpstreamProtocol;
  EXPECT_EQ(parse_sidecar_config(env_of(kRequired), {}).proxy.upstream_protocol, Upstream::http1);
  auto env = kRequired;
  env["QUEUE_SERVING_PORT"] = "8013";  // Knative's serving port for revisions whose port is named h2c
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.upstream_protocol, Upstream::h2c);
  env["ENABLE_HTTP2_AUTO_DETECTION"] = "true";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.upstream_protocol, Upstream::detect);
  env["SLUICE_UPSTREAM_PROTOCOL"] = "http1";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.upstream_protocol, Upstream::http1) << "explicit wins";
  env["SLUICE_UPSTREAM_PROTOCOL"] = "h3";
  EXPECT_EQ(sidecar_error(env), "SLUICE_UPSTREAM_PROTOCOL=\"h3\": expected http1, h2c or detect");
}

TEST(SidecarConfig, ZeroRevisionTimeoutMeansNoTimeout) {
  auto env = kRequired;
  env["REVISION_TIMEOUT_SECONDS"] = "0";
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_TRUE(c.revision_timeout_disabled);
  EXPECT_EQ(c.proxy.timeouts.request.count(), 0);
}

TEST(SidecarConfig, RequestLogFromEitherGenerationOfVariables) {
  auto env = kRequired;
  env["SERVING_ENABLE_REQUEST_LOG"] = "true";
  EXPECT_TRUE(parse_sidecar_config(env_of(env), {}).proxy.request_log);
  env = kRequired;
  env["OBSERVABILITY_CONFIG"] = R"({"enableRequestLog": true, "requestLogTemplate": "x"})";
  EXPECT_TRUE(parse_sidecar_config(env_of(env), {}).proxy.request_log);
  env["OBSERVABILITY_CONFIG"] = "{not json";
  EXPECT_NE(sidecar_error(env).find("OBSERVABILITY_CONFIG"), std::string::npos);
}

// queue-proxy: "Error setting up request logger. Request logs will be unavailable." and it serves on.
TEST(SidecarConfig, ATemplateGoCannotParseTurnsRequestLogsOffInsteadOfStopping) {
  auto env = kRequired;
  env["SERVING_ENABLE_REQUEST_LOG"] = "true";
  env["SERVING_REQUEST_LOG_TEMPLATE"] = "{{if .Request.Host}}";
  EXPECT_EQ(sidecar_error(env), "");
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_FALSE(c.proxy.request_log);
  EXPECT_EQ(c.proxy.request_log_template, nullptr);
  EXPECT_EQ(c.request_log_error, "SERVING_REQUEST_LOG_TEMPLATE: template: requestLog:2: unexpected EOF");

  env = kRequired;
  env["OBSERVABILITY_CONFIG"] = R"({"enableRequestLog": true, "requestLogTemplate": "{{nofunc}}"})";
  c = parse_sidecar_config(env_of(env), {});
  EXPECT_FALSE(c.proxy.request_log);
  EXPECT_EQ(c.request_log_error,
            "OBSERVABILITY_CONFIG requestLogTemplate: template: requestLog:1: function \"nofunc\" not defined");

  // A field that does not exist is no parse error in Go: the log stays on and fails line by line.
  env["OBSERVABILITY_CONFIG"] = R"({"enableRequestLog": true, "requestLogTemplate": "{{.Request.Nope}}"})";
  c = parse_sidecar_config(env_of(env), {});
  EXPECT_TRUE(c.proxy.request_log);
  EXPECT_NE(c.proxy.request_log_template, nullptr);
  EXPECT_EQ(c.request_log_error, "");

  // Without the request log queue-proxy never parses the template, so says nothing about it.
  env["OBSERVABILITY_CONFIG"] = R"({"enableRequestLog": false, "requestLogTemplate": "{{nofunc}}"})";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).request_log_error, "");
}

TEST(SidecarConfig, UnknownEnvironmentVariablesAreIgnored) {
  auto env = kRequired;
  env["SOME_FUTURE_KNATIVE_VAR"] = "whatever";
  EXPECT_EQ(sidecar_error(env), "");
}

TEST(SidecarConfig, BreakerQueueIsTenTimesTheConcurrencyUnlessSet) {
  auto c = parse_sidecar_config(env_of(kRequired), {});
  EXPECT_EQ(c.proxy.container_concurrency, 10u);
  EXPECT_EQ(c.proxy.queue_depth, 100u);
  auto env = kRequired;
  env["SLUICE_QUEUE_DEPTH"] = "5";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.queue_depth, 5u);
}

TEST(SidecarConfig, RequestMetricsFromEitherGenerationOfVariables) {
  auto env = kRequired;
  EXPECT_FALSE(parse_sidecar_config(env_of(env), {}).user_metrics);
  env["SERVING_REQUEST_METRICS_BACKEND"] = "prometheus";
  auto old_style = parse_sidecar_config(env_of(env), {});
  EXPECT_TRUE(old_style.user_metrics);
  EXPECT_EQ(old_style.metric_names, metrics::MetricNames::knative_legacy);
  env.erase("SERVING_REQUEST_METRICS_BACKEND");
  env["OBSERVABILITY_CONFIG"] = R"({"requestMetrics":{"protocol":"prometheus"},"enableProbeRequestLog":true})";
  auto new_style = parse_sidecar_config(env_of(env), {});
  EXPECT_TRUE(new_style.user_metrics);
  EXPECT_TRUE(new_style.proxy.probe_request_log);
  EXPECT_EQ(new_style.metric_names, metrics::MetricNames::knative_otel);
  env["SLUICE_METRIC_NAMES"] = "both";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).metric_names, metrics::MetricNames::both);
  env["SLUICE_METRIC_NAMES"] = "all";
  EXPECT_NE(sidecar_error(env).find("SLUICE_METRIC_NAMES"), std::string::npos);
}

// knative.dev/pkg's Prometheus server listens where requestMetrics.endpoint says ("host:port"), else :9091.
TEST(SidecarConfig, RequestMetricsEndpointIsWhereThePrometheusPortListens) {
  auto env = kRequired;
  env["OBSERVABILITY_CONFIG"] = R"({"requestMetrics":{"protocol":"prometheus"}})";
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.control.user_metrics_port, 9091);
  EXPECT_EQ(c.control.user_metrics_address, "");
  env["OBSERVABILITY_CONFIG"] = R"({"requestMetrics":{"protocol":"prometheus","endpoint":":9095"}})";
  c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.control.user_metrics_port, 9095);
  EXPECT_EQ(c.control.user_metrics_address, "");
  EXPECT_TRUE(c.not_acted_on.empty());
  env["OBSERVABILITY_CONFIG"] = R"({"requestMetrics":{"protocol":"prometheus","endpoint":"[::1]:9095"}})";
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).control.user_metrics_address, "::1");
  env["SLUICE_USER_METRICS_PORT"] = "0";  // sluice's own variable wins
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).control.user_metrics_port, 0);
  env.erase("SLUICE_USER_METRICS_PORT");
  for (const char* bad : {"9095", ":80", ":x", "a:b:9095", ":"}) {
    env["OBSERVABILITY_CONFIG"] = std::string(R"({"requestMetrics":{"protocol":"prometheus","endpoint":")") + bad + "\"}}";
    EXPECT_NE(sidecar_error(env).find("requestMetrics.endpoint"), std::string::npos) << bad;
  }
}

TEST(SidecarConfig, TlsKnobsAreKnativesWithTls13AsTheDefaultMinimum) {
  auto env = kRequired;
  env["SLUICE_TLS_CERT_FILE"] = "/tmp/absent.crt";
  env["SLUICE_TLS_KEY_FILE"] = "/tmp/absent.key";
  // Knative injects every variable, empty unless config-deployment sets queue-sidecar-tls-*.
  for (const char* v : {"QUEUE_PROXY_TLS_MIN_VERSION", "QUEUE_PROXY_TLS_MAX_VERSION", "QUEUE_PROXY_TLS_CIPHER_SUITES",
                        "QUEUE_PROXY_TLS_CURVE_PREFERENCES"})
    env[v] = "";
  auto c = parse_sidecar_config(env_of(env), {});
  ASSERT_TRUE(c.proxy.tls);
  EXPECT_EQ(c.proxy.tls->min_version, proxy::TlsVersion::v1_3);
  EXPECT_EQ(c.proxy.tls->max_version, proxy::TlsVersion::v1_3);
  EXPECT_EQ(c.proxy.tls->tls12_ciphers, "");
  EXPECT_EQ(c.proxy.tls->groups, "");

  env["QUEUE_PROXY_TLS_MIN_VERSION"] = "1.2";
  env["QUEUE_PROXY_TLS_MAX_VERSION"] = "1.2";
  env["QUEUE_PROXY_TLS_CIPHER_SUITES"] =
      "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256";
  env["QUEUE_PROXY_TLS_CURVE_PREFERENCES"] = "X25519,CurveP256,P-384";
  c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.proxy.tls->min_version, proxy::TlsVersion::v1_2);
  EXPECT_EQ(c.proxy.tls->max_version, proxy::TlsVersion::v1_2);
  // TLS 1.3 suites are accepted and configure nothing, as in Go.
  EXPECT_EQ(c.proxy.tls->tls12_ciphers, "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305");
  EXPECT_EQ(c.proxy.tls->groups, "X25519:P-256:P-384");

  env.erase("QUEUE_PROXY_TLS_MIN_VERSION");
  env["SLUICE_TLS_MIN_VERSION"] = "1.2";  // the older name still works when Knative's is absent
  EXPECT_EQ(parse_sidecar_config(env_of(env), {}).proxy.tls->min_version, proxy::TlsVersion::v1_2);
}

// queue-proxy's logger ignores a level it cannot read; so a pod with one still starts, at info.
TEST(SidecarConfig, AnUnknownLoggingLevelIsInfoNotAnError) {
  auto env = kRequired;
  env["SERVING_LOGGING_LEVEL"] = "loud";
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.logging_level, "info");
  std::string notes;
  for (const auto& n : c.not_acted_on) notes += n + "\n";
  EXPECT_NE(notes.find("SERVING_LOGGING_LEVEL=loud"), std::string::npos) << notes;
}

// Values queue-proxy starts with: a concurrency below 1 (no breaker), a negative timeout, a USER_PORT it
// only joins into an address (every request then fails), a TLS port it reads only with TLS on.
TEST(SidecarConfig, ValuesQueueProxyStartsWithStartSluiceToo) {
  auto env = kRequired;
  env["CONTAINER_CONCURRENCY"] = "-1";
  env["REVISION_TIMEOUT_SECONDS"] = "-1";
  env["USER_PORT"] = "http-port";
  env["QUEUE_SERVING_TLS_PORT"] = "none";
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.container_concurrency, 0);
  EXPECT_TRUE(c.revision_timeout_disabled);
  EXPECT_EQ(c.proxy.upstream_port, 0);
  std::string notes;
  for (const auto& n : c.not_acted_on) notes += n + "\n";
  EXPECT_NE(notes.find("USER_PORT=http-port"), std::string::npos) << notes;
}

// Per-node mode hands each pod's proxy its pod's file system: Knative's TLS pair is looked for under it.
TEST(SidecarConfig, TheDefaultTlsPairIsLookedForUnderThePodsRoot) {
  const auto root = std::filesystem::temp_directory_path() / ("sluice-pod-root-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "var/lib/knative/certs");
  struct Remove { std::filesystem::path p; ~Remove() { std::filesystem::remove_all(p); } } remove{root};
  auto env = kRequired;
  env["SLUICE_POD_ROOT"] = root.string() + "/";
  EXPECT_FALSE(parse_sidecar_config(env_of(env), {}).proxy.tls) << "no pair there yet: the TLS port stays off";
  std::ofstream(root / "var/lib/knative/certs/tls.crt") << "x";
  std::ofstream(root / "var/lib/knative/certs/tls.key") << "x";
  auto c = parse_sidecar_config(env_of(env), {});
  ASSERT_TRUE(c.proxy.tls);
  EXPECT_EQ(c.proxy.tls->cert_file, root.string() + "/var/lib/knative/certs/tls.crt");
  EXPECT_EQ(c.proxy.tls->key_file, root.string() + "/var/lib/knative/certs/tls.key");
  EXPECT_EQ(c.tls_port, 8112);
}

// Set by the per-node agent (app/node/mode.cpp) for a pod's proxy: descriptors it was started with.
TEST(SidecarConfig, HandedOverListenersAndTheAgentsChannelAreOpenDescriptors) {
  const int a = ::dup(STDOUT_FILENO), b = ::dup(STDOUT_FILENO);
  auto env = kRequired;
  env["SLUICE_LISTEN_FDS"] = std::to_string(a) + "," + std::to_string(b);
  env["SLUICE_NODE_CHANNEL"] = std::to_string(b);
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.listen_fds, (std::vector<int>{a, b}));
  EXPECT_EQ(c.node_channel, b);
  EXPECT_EQ(parse_sidecar_config(env_of(kRequired), {}).node_channel, -1);

  ::close(b);  // no longer open
  env = kRequired;
  env["SLUICE_NODE_CHANNEL"] = std::to_string(b);
  EXPECT_EQ(sidecar_error(env),
            "SLUICE_NODE_CHANNEL=\"" + std::to_string(b) + "\": expected the number of an open descriptor (3 or more)");
  for (const std::string& bad : {std::to_string(b), std::string("1"), std::string("x"), std::string(), std::string("-4")}) {
    env = kRequired;
    env["SLUICE_LISTEN_FDS"] = std::to_string(a) + "," + bad;
    EXPECT_EQ(sidecar_error(env), "SLUICE_LISTEN_FDS=\"" + env["SLUICE_LISTEN_FDS"] +
                                      "\": expected numbers of open descriptors (3 or more), comma separated") << bad;
  }
  ::close(a);
}

TEST(SidecarConfig, TlsKnobsAreIgnoredWhileTheTlsPortIsOff) {
  auto env = kRequired;
  env["QUEUE_PROXY_TLS_MIN_VERSION"] = "1.1";
  env["QUEUE_PROXY_TLS_CURVE_PREFERENCES"] = "secp256k1";
  EXPECT_EQ(sidecar_error(env), "");
}

TEST(SidecarConfig, BadTlsKnobsNameTheVariableWithTheTlsPortOn) {
  const std::pair<const char*, const char*> bad[] = {
      {"QUEUE_PROXY_TLS_MIN_VERSION", "1.1"},
      {"QUEUE_PROXY_TLS_MAX_VERSION", "TLS13"},
      {"QUEUE_PROXY_TLS_MAX_VERSION", "1.2"},  // below the default minimum 1.3
      {"QUEUE_PROXY_TLS_CIPHER_SUITES", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,ECDHE-RSA-AES128-GCM-SHA256"},
      {"QUEUE_PROXY_TLS_CURVE_PREFERENCES", "secp256k1"},
  };
  for (const auto& [name, value] : bad) {
    auto env = kRequired;
    env["SLUICE_TLS_CERT_FILE"] = "/tmp/absent.crt";
    env["SLUICE_TLS_KEY_FILE"] = "/tmp/absent.key";
    env[name] = value;
    auto err = sidecar_error(env);
    EXPECT_NE(err.find(name), std::string::npos) << name << "=" << value << " gave: " << err;
  }
}

TEST(ReadinessProbe, DefaultIsAggressiveTcpToTheUserPort) {
  auto p = parse_readiness_probe("", 8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::tcp_connect);
  EXPECT_EQ(p.port, 8080);
  EXPECT_EQ(p.host, "127.0.0.1");
  EXPECT_EQ(p.period.count(), 0);
}

TEST(ReadinessProbe, KnativeTcpProbe) {
  auto p = parse_readiness_probe(R"({"tcpSocket":{"port":8080,"host":"127.0.0.1"},"successThreshold":1})", 9);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::tcp_connect);
  EXPECT_EQ(p.port, 8080);
  EXPECT_EQ(p.period.count(), 0);
}

TEST(ReadinessProbe, HttpProbeWithHeadersAndTiming) {
  auto p = parse_readiness_probe(
      R"({"httpGet":{"path":"healthz","port":"8081","scheme":"HTTP","httpHeaders":[{"name":"X-A","value":"b"}]},)"
      R"("timeoutSeconds":3,"periodSeconds":5,"failureThreshold":3})",
      8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::http_get);
  EXPECT_EQ(p.port, 8081);
  EXPECT_EQ(p.path, "/healthz");
  ASSERT_EQ(p.headers.size(), 1u);
  EXPECT_EQ(p.headers[0].first, "X-A");
  EXPECT_EQ(p.timeout.count(), 3000);
  EXPECT_EQ(p.period.count(), 5000);
}

// queue-proxy decodes one probe object, or with ENABLE_MULTI_CONTAINER_PROBES an array: the other shape
// stops it, naming the variable.
TEST(ReadinessProbe, TheShapeFollowsMultiContainerProbes) {
  auto env = kRequired;
  env["SERVING_READINESS_PROBE"] = R"([{"httpGet":{"port":8080,"path":"/a"}},{"tcpSocket":{"port":9000}}])";
  EXPECT_NE(sidecar_error(env).find("SERVING_READINESS_PROBE"), std::string::npos);
  env["ENABLE_MULTI_CONTAINER_PROBES"] = "true";
  EXPECT_EQ(sidecar_error(env), "");
  env["SERVING_READINESS_PROBE"] = R"({"tcpSocket":{"port":9000}})";
  EXPECT_NE(sidecar_error(env).find("SERVING_READINESS_PROBE"), std::string::npos);
}

TEST(ReadinessProbe, ACountOfSecondsBeyondKubernetesInt32IsAConfigErrorNotAnOverflow) {
  auto env = kRequired;
  env["SERVING_READINESS_PROBE"] = R"({"httpGet":{"port":8080},"periodSeconds":20000000000000000})";
  const auto err = sidecar_error(env);
  EXPECT_NE(err.find("periodSeconds must be at most 2147483647"), std::string::npos) << err;
  env["SERVING_READINESS_PROBE"] = R"({"tcpSocket":{"port":8080},"timeoutSeconds":18446744073709551615})";
  EXPECT_NE(sidecar_error(env).find("timeoutSeconds must be at most"), std::string::npos);
}

TEST(ReadinessProbe, MultiContainerProbesAreAllChecked) {
  auto env = kRequired;
  env["ENABLE_MULTI_CONTAINER_PROBES"] = "true";
  env["SERVING_READINESS_PROBE"] =
      R"([{"httpGet":{"port":8080,"path":"/a"}},{"tcpSocket":{"port":9000}},{"grpc":{"port":9002}},)"
      R"({"httpGet":{"port":9001,"path":"/b"},"periodSeconds":2}])";
  auto c = parse_sidecar_config(env_of(env), {});
  EXPECT_EQ(c.proxy.readiness.path, "/a");
  ASSERT_EQ(c.proxy.sidecar_readiness.size(), 3u);
  EXPECT_EQ(c.proxy.sidecar_readiness[0].kind, proxy::ReadinessProbeConfig::Kind::tcp_connect);
  EXPECT_EQ(c.proxy.sidecar_readiness[0].port, 9000);
  EXPECT_EQ(c.proxy.sidecar_readiness[1].kind, proxy::ReadinessProbeConfig::Kind::grpc_health);
  EXPECT_EQ(c.proxy.sidecar_readiness[1].port, 9002);
  EXPECT_EQ(c.proxy.sidecar_readiness[2].port, 9001);
  EXPECT_EQ(c.proxy.sidecar_readiness[2].path, "/b");
  EXPECT_EQ(c.proxy.sidecar_readiness[2].period.count(), 2000);

  env["ENABLE_MULTI_CONTAINER_PROBES"] = "yes";
  EXPECT_NE(sidecar_error(env).find("ENABLE_MULTI_CONTAINER_PROBES"), std::string::npos);
  env["ENABLE_MULTI_CONTAINER_PROBES"] = "true";
  env["SERVING_READINESS_PROBE"] = R"([{"tcpSocket":{"port":8080}},{"tcpSocket":{"port":"metrics"}}])";
  EXPECT_NE(sidecar_error(env).find("SERVING_READINESS_PROBE"), std::string::npos);
}

TEST(ReadinessProbe, GrpcProbeAsksTheHealthServiceOnLoopback) {
  auto p = parse_readiness_probe(R"({"grpc":{"port":9090,"service":"app"},"successThreshold":1})", 8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::grpc_health);
  EXPECT_EQ(p.host, "127.0.0.1");
  EXPECT_EQ(p.port, 9090);
  EXPECT_EQ(p.grpc_service, "app");
  EXPECT_EQ(p.period.count(), 0);
  auto q = parse_readiness_probe(R"({"grpc":{"service":null},"periodSeconds":3})", 8080);
  EXPECT_EQ(q.kind, proxy::ReadinessProbeConfig::Kind::grpc_health);
  EXPECT_EQ(q.port, 8080);  // Knative writes the user port when the container gave none
  EXPECT_EQ(q.grpc_service, "");
}

TEST(ReadinessProbe, SuccessThresholdIsKept) {
  EXPECT_EQ(parse_readiness_probe(R"({"tcpSocket":{},"successThreshold":3})", 8080).success_threshold, 3);
  EXPECT_EQ(parse_readiness_probe(R"({"tcpSocket":{}})", 8080).success_threshold, 1);
}

TEST(ReadinessProbe, HttpsSchemeIsAnHttpsGet) {
  auto p = parse_readiness_probe(R"({"httpGet":{"port":8443,"scheme":"HTTPS"}})", 8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::http_get);
  EXPECT_TRUE(p.https);
  EXPECT_EQ(p.port, 8443);
  EXPECT_FALSE(parse_readiness_probe(R"({"httpGet":{"scheme":"http"}})", 8080).https);
  EXPECT_FALSE(parse_readiness_probe(R"({"httpGet":{}})", 8080).https);  // Knative writes HTTP when empty
  // Go's transport refuses any other scheme: a probe that never passes, not an exit.
  EXPECT_EQ(parse_readiness_probe(R"({"httpGet":{"scheme":"FTP"}})", 8080).kind,
            proxy::ReadinessProbeConfig::Kind::never_passes);
}

TEST(ReadinessProbe, TheActionIsChosenInQueueProxysOrder) {
  // httpGet before tcpSocket before grpc; a null action is no action (Go's nil pointer).
  auto p = parse_readiness_probe(R"({"tcpSocket":{"port":1},"httpGet":{"port":2},"grpc":{"port":3}})", 8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::http_get);
  EXPECT_EQ(p.port, 2);
  p = parse_readiness_probe(R"({"httpGet":null,"tcpSocket":{"port":1},"grpc":{"port":3}})", 8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::tcp_connect);
  p = parse_readiness_probe(R"({"httpGet":null,"tcpSocket":null,"grpc":{"port":3},"exec":{"command":["x"]}})", 8080);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::grpc_health);
}

// queue-proxy starts with these and fails every health check; sluice did exit.
TEST(ReadinessProbe, ExecOrNoActionStartsAndNeverPasses) {
  for (const char* probe : {R"({"exec":{"command":["true"]}})", "{}", R"({"periodSeconds":1})", "null"}) {
    auto env = kRequired;
    env["SERVING_READINESS_PROBE"] = probe;
    auto c = parse_sidecar_config(env_of(env), {});
    EXPECT_EQ(c.proxy.readiness.kind, proxy::ReadinessProbeConfig::Kind::never_passes) << probe;
  }
  auto env = kRequired;
  env["ENABLE_MULTI_CONTAINER_PROBES"] = "true";
  env["SERVING_READINESS_PROBE"] = R"([{"tcpSocket":{"port":8080}},{"exec":{"command":["true"]}}])";
  auto c = parse_sidecar_config(env_of(env), {});
  ASSERT_EQ(c.proxy.sidecar_readiness.size(), 1u);
  EXPECT_EQ(c.proxy.sidecar_readiness[0].kind, proxy::ReadinessProbeConfig::Kind::never_passes);
}

TEST(ReadinessProbe, FieldsTheSidecarDoesNotUseAreLeftAlone) {
  auto p = parse_readiness_probe(
      R"({"tcpSocket":{"port":8080},"initialDelaySeconds":5,"terminationGracePeriodSeconds":30,)"
      R"("failureThreshold":3,"aNewerField":{"x":[1,"y"]}})",
      9);
  EXPECT_EQ(p.kind, proxy::ReadinessProbeConfig::Kind::tcp_connect);
  EXPECT_EQ(p.port, 8080);
}

TEST(ReadinessProbe, BadProbesNameTheVariable) {
  // What Go's decoder rejects (queue-proxy exits too), and values the sidecar cannot act on.
  for (const char* bad : {"{", "[1]", R"({"tcpSocket":{"port":"http"}})", R"({"tcpSocket":{"port":70000}})",
                          R"({"httpGet":{"host":"not an ip"}})", R"({"periodSeconds":-1,"tcpSocket":{}})",
                          R"({"grpc":"x"})", R"({"grpc":{"service":7}})", R"({"tcpSocket":1})"}) {
    auto env = kRequired;
    env["SERVING_READINESS_PROBE"] = bad;
    EXPECT_NE(sidecar_error(env).find("SERVING_READINESS_PROBE"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace sluice::app
