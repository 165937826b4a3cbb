// What Knative 1.19-1.23 injects into queue-proxy, through the real sidecar: request-log templates from
// either generation of variables (and the two ways a template fails, as queue-proxy fails them), the
// start-up warning for settings sluice does not act on, and ENABLE_HTTP_FULL_DUPLEX with an app that
// answers while the request body still arrives.
#include <gtest/gtest.h>

#include "harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// Exit status and stderr of a sidecar that must refuse to start.
CommandResult refused_start(std::map<std::string, std::string> extra) {
  auto env = knative_env(8080);
  for (auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : env) argv.push_back(k + "=" + v);
  argv.insert(argv.end(), {SLUICE_BIN, "sidecar"});
  return run_command(argv, 10s);
}

TEST(RequestLogTemplate, TheOldVariablesTemplateShapesEachLine) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"},
              {"SERVING_REQUEST_LOG_TEMPLATE",
               R"(tmpl {{.Request.Method}} {{.Request.URL}} {{.Response.Code}} {{.Response.Size}} )"
               R"({{.Revision.Name}} {{index .Request.Header "X-Tag"}}{{if eq .Response.Code 404}} missing{{end}})"}}}};
  ASSERT_EQ(curl({"-H", "X-Tag: t1", sidecar.url("/bytes/5")}).exit_code, 0);
  auto line = sidecar.process->wait_for_line("tmpl GET");
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "tmpl GET /bytes/5 200 5 demo-00001 [t1]");
  ASSERT_EQ(curl({sidecar.url("/status/404")}).exit_code, 0);
  line = sidecar.process->wait_for_line("tmpl GET /status/404");
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "tmpl GET /status/404 404 11 demo-00001 [] missing");  // the demo app says "status 404\\n"
}

TEST(RequestLogTemplate, ObservabilityConfigTemplateWithTheTraceIdOfTraceparent) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               R"({"enableRequestLog":true,"requestLogTemplate":"{\"m\":\"{{.Request.Method}}\",\"t\":\"{{.TraceID}}\",\"p\":\"{{.Request.Proto}}\"}"})"}}}};
  ASSERT_EQ(curl({"-H", "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "--http2-prior-knowledge",
                  sidecar.url("/")})
                .exit_code,
            0);
  auto line = sidecar.process->wait_for_line("{\"m\":");
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, R"({"m":"GET","t":"4bf92f3577b34da6a3ce929d0e0e4736","p":"HTTP/2.0"})");
}

TEST(RequestLogTemplate, WithRangeAndVariablesRenderAsQueueProxyRendersThem) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"},
              {"SERVING_REQUEST_LOG_TEMPLATE",
               R"(rl {{$m := .Request.Method}}{{with .Response}}{{$m}} {{.Code}}{{end}})"
               R"({{range $k, $v := .Request.Header}}{{if eq $k "X-Tag"}} {{$k}}={{index $v 0}}{{end}}{{end}})"}}}};
  ASSERT_EQ(curl({"-H", "X-Tag: t1", sidecar.url("/bytes/5")}).exit_code, 0);
  auto line = sidecar.process->wait_for_line("rl GET");
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "rl GET 200 X-Tag=t1");
}

// Go's Parse accepts a field that does not exist; running the template fails, and Knative writes its own line.
TEST(RequestLogTemplate, AMissingFieldGivesKnativesLineForEachRequest) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"},
                                         {"SERVING_REQUEST_LOG_TEMPLATE", "{{.Request.Nope}}"}}}};
  ASSERT_EQ(curl({sidecar.url("/bytes/5?a=1")}).exit_code, 0);
  auto line = sidecar.process->wait_for_line("Invalid request log template");
  ASSERT_TRUE(line);
  EXPECT_TRUE(line->starts_with("Invalid request log template: method: GET, response code: 200, latency: ")) << *line;
  EXPECT_TRUE(line->ends_with(", url: /bytes/5?a=1")) << *line;
}

// queue-proxy logs "Error setting up request logger. Request logs will be unavailable." and serves on.
TEST(RequestLogTemplate, AnUnparsableTemplateIsNamedOnceAndRequestsAreServedUnlogged) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"},
                                         {"SERVING_REQUEST_LOG_TEMPLATE", "tmpl {{.Request.Method"}}}};
  auto line = sidecar.process->wait_for_line("Error setting up request logger");
  ASSERT_TRUE(line);
  EXPECT_NE(line->find("SERVING_REQUEST_LOG_TEMPLATE: template: requestLog:"), std::string::npos) << *line;
  EXPECT_NE(line->find("unclosed action"), std::string::npos) << *line;
  ASSERT_EQ(curl({sidecar.url("/bytes/5")}).exit_code, 0);
  EXPECT_EQ(count_of(sidecar.process->stdout_text(), "tmpl"), 0u);

  Sidecar other{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", R"({"enableRequestLog":true,"requestLogTemplate":"{{if .Request.Host}}"})"}}}};
  line = other.process->wait_for_line("Error setting up request logger");
  ASSERT_TRUE(line);
  EXPECT_NE(line->find("OBSERVABILITY_CONFIG requestLogTemplate"), std::string::npos) << *line;
  EXPECT_EQ(curl({other.url("/bytes/5")}).exit_code, 0);
}

TEST(NothingIgnoredSilently, SettingsSluiceDoesNotActOnAreNamedOnceAtStart) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"ENABLE_PROFILING", "true"},
                                         {"HOST_IP", "10.0.0.1"},
                                         {"METRICS_COLLECTOR_ADDRESS", "otel:55678"},
                                         {"SOME_FUTURE_VARIABLE", "x"}}}};
  auto out = sidecar.process->stdout_text();
  EXPECT_EQ(count_of(out, "accepted but not acted on"), 1u) << out;
  auto line = sidecar.process->wait_for_line("accepted but not acted on");
  ASSERT_TRUE(line);
  for (const char* name : {"ENABLE_PROFILING", "HOST_IP", "METRICS_COLLECTOR_ADDRESS"})
    EXPECT_NE(line->find(name), std::string::npos) << name << " in " << *line;
  EXPECT_EQ(line->find("SOME_FUTURE_VARIABLE"), std::string::npos) << *line;  // unknown: ignored as before

  Sidecar quiet{SidecarOptions{.user_port = backend.port}};
  EXPECT_EQ(count_of(quiet.process->stdout_text(), "not acted on"), 0u);
}

TEST(NothingIgnoredSilently, NewStyleKeysNotActedOnAreNamedToo) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               R"({"runtime":{"profiling":"enabled"},"metrics":{"protocol":"prometheus"},"tracing":{"protocol":"stdout"}})"}}}};
  auto line = sidecar.process->wait_for_line("accepted but not acted on");
  ASSERT_TRUE(line);
  for (const char* key : {"runtime.profiling", "metrics.protocol"})
    EXPECT_NE(line->find(key), std::string::npos) << key << " in " << *line;
  EXPECT_EQ(line->find("tracing.protocol"), std::string::npos) << *line;  // stdout prints spans now
}

TEST(FullDuplex, TheAppAnswersWhileTheRequestBodyIsStillArriving) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"ENABLE_HTTP_FULL_DUPLEX", "true"}}}};
  RawClient c(sidecar.port);
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
  // The first piece comes back before the client has sent the rest (or the end) of its body.
  auto got = c.read_until("first", 10s);
  ASSERT_NE(got.find("first"), std::string::npos) << got;
  EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
  c.send("6\r\nsecond\r\n0\r\n\r\n");
  got = c.read_until("0\r\n\r\n", 10s);
  EXPECT_NE(got.find("second"), std::string::npos) << got;
  EXPECT_NE(got.find("0\r\n\r\n"), std::string::npos) << got;

  auto r = refused_start({{"ENABLE_HTTP_FULL_DUPLEX", "sometimes"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ENABLE_HTTP_FULL_DUPLEX"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sluice::test
