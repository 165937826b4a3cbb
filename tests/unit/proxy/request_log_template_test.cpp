// Knative's request-log templates: the outputs below are what Go's text/template prints for the same
// template and values (Knative's default template, its documented fields, {{if}}/{{index}} forms).
#include "proxy/request_log/template.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace sluice::proxy {
namespace {

// Knative's DefaultRequestLogTemplate (serving pkg/observability/config.go, v1.19 and later).
constexpr const char* kKnativeDefault =
    R"({"httpRequest": {"requestMethod": "{{.Request.Method}}", "requestUrl": "{{js .Request.RequestURI}}", )"
    R"("requestSize": "{{.Request.ContentLength}}", "status": {{.Response.Code}}, "responseSize": "{{.Response.Size}}", )"
    R"("userAgent": "{{js .Request.UserAgent}}", "remoteIp": "{{js .Request.RemoteAddr}}", "serverIp": "{{.Revision.PodIP}}", )"
    R"("referer": "{{js .Request.Referer}}", "latency": "{{.Response.Latency}}s", "protocol": "{{.Request.Proto}}"}, )"
    R"("traceId": "{{.TraceID}}"})";

struct Fixture {
  Fixture() {
    req.method(http::verb::post);
    req.target("/path?q=\"x\"&a=<b>");
    req.set(http::field::host, "hello.default.example.com");
    req.set(http::field::user_agent, "curl/8.0");
    req.set(http::field::content_length, "42");
    req.insert("x-b3-traceid", "b3trace");
    req.insert("X-Custom", "one");
    req.insert("x-custom", "two");
    record.start = Clock::now();
    record.peer = "10.1.2.3:5555";
    record.status = 201;
    record.response_bytes = 7;
    revision = {.name = "hello-00001", .namespace_name = "default", .service = "hello", .configuration = "hello-cfg",
                .pod_name = "hello-00001-deployment-x", .pod_ip = "10.0.0.9"};
  }
  std::string render(const char* text, Clock::duration latency = std::chrono::milliseconds(1234),
                     std::string_view trace = "") {
    RequestLogTemplate t(text);
    std::string out;
    t.render(out, RequestLogInput{.record = record, .request = &req, .end = record.start + latency,
                                  .revision = revision, .trace_id = trace});
    return out;
  }
  http::request_header<> req;
  ExchangeRecord record;
  RevisionInfo revision;
};

TEST(RequestLogTemplate, KnativesDefaultTemplateIsValidJsonWithGoValues) {
  Fixture f;
  auto line = f.render(kKnativeDefault, std::chrono::microseconds(2500), "4bf92f3577b34da6a3ce929d0e0e4736");
  auto v = boost::json::parse(line);
  const auto& r = v.at("httpRequest").as_object();
  EXPECT_EQ(r.at("requestMethod").as_string(), "POST");
  EXPECT_EQ(r.at("requestUrl").as_string(), "/path?q=\"x\"&a=<b>");
  EXPECT_NE(line.find(R"("requestUrl": "/path?q\u003D\"x\"\u0026a\u003D\u003Cb\u003E")"), std::string::npos)
      << line;  // js-escaped as Go's template escapes
  EXPECT_EQ(r.at("requestSize").as_string(), "42");
  EXPECT_EQ(r.at("status").as_int64(), 201);
  EXPECT_EQ(r.at("responseSize").as_string(), "7");
  EXPECT_EQ(r.at("remoteIp").as_string(), "10.1.2.3:5555");
  EXPECT_EQ(r.at("serverIp").as_string(), "10.0.0.9");
  EXPECT_EQ(r.at("latency").as_string(), "0.0025s");
  EXPECT_EQ(r.at("protocol").as_string(), "HTTP/1.1");
  EXPECT_EQ(v.at("traceId").as_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(RequestLogTemplate, RevisionAndRequestFields) {
  Fixture f;
  EXPECT_EQ(f.render("{{.Revision.Name}}, {{.Revision.Namespace}}, {{.Revision.Service}}, {{.Revision.Configuration}}, "
                     "{{.Revision.PodName}}, {{.Revision.PodIP}}"),
            "hello-00001, default, hello, hello-cfg, hello-00001-deployment-x, 10.0.0.9");
  EXPECT_EQ(f.render("{{.Request.Host}} {{.Request.URL}} {{.Request.URL.Path}} {{.Response.Latency}}"),
            "hello.default.example.com /path?q=\"x\"&a=<b> /path 1.234");
}

TEST(RequestLogTemplate, IndexOfHeadersIsByCanonicalNameAndPrintsTheList) {
  Fixture f;
  EXPECT_EQ(f.render(R"({{index .Request.Header "X-B3-Traceid"}})"), "[b3trace]");
  EXPECT_EQ(f.render(R"({{index .Request.Header "X-Custom"}})"), "[one two]");
  EXPECT_EQ(f.render(R"({{index .Request.Header "X-Custom" 1}})"), "two");
  EXPECT_EQ(f.render(R"({{index .Request.Header "x-custom"}})"), "[]");  // not canonical: Go finds nothing
  EXPECT_EQ(f.render(R"({{.Request.Header.Get "x-custom"}})"), "one");
}

TEST(RequestLogTemplate, IfElseTrimMarkersAndFunctions) {
  Fixture f;
  EXPECT_EQ(f.render(R"({{if eq .Response.Code 201}}created{{else if eq .Response.Code 200}}ok{{else}}other{{end}})"),
            "created");
  EXPECT_EQ(f.render(R"({{if index .Request.Header "X-Missing"}}yes{{else}}no{{end}})"), "no");
  EXPECT_EQ(f.render("a  {{- .Response.Code -}}  b"), "a201b");
  EXPECT_EQ(f.render(R"({{printf "%s:%d" .Request.Method .Response.Code}} {{.Request.Method | html}})"), "POST:201 POST");
  EXPECT_EQ(f.render(R"({{urlquery "a b&c"}} {{len .Request.Method}} {{not false}} {{and 1 0}} {{or "" "x"}})"),
            "a+b%26c 4 true 0 x");
  EXPECT_EQ(f.render("{{/* a comment */}}x"), "x");
}

TEST(RequestLogTemplate, LatencyPrintsAsGoPrintsAFloat64) {
  Fixture f;
  EXPECT_EQ(f.render("{{.Response.Latency}}", std::chrono::microseconds(5)), "5e-06");
  EXPECT_EQ(f.render("{{.Response.Latency}}", std::chrono::seconds(2)), "2");
  EXPECT_EQ(f.render("{{.Response.Latency}}", std::chrono::microseconds(100)), "0.0001");
}

TEST(RequestLogTemplate, AnEvaluationErrorWritesKnativesInvalidTemplateLine) {
  Fixture f;
  auto line = f.render(R"({{index .Request.Method 1 2}})");
  EXPECT_EQ(line.rfind("Invalid request log template: method: POST, response code: 201, latency: 1.234, url: /path", 0), 0u)
      << line;
}

TEST(RequestLogTemplate, UnparsableTemplatesAreRefusedSayingWhy) {
  for (const char* bad : {"{{.Request.Method", "{{if .Request.Method}}x", "{{end}}", "{{.Request.Nope}}",
                          "{{nofunc .Request.Method}}", "{{range .Request.Header}}{{end}}", "{{\"unterminated}}",
                          "{{.Request.Method | .Response.Code}}", "{{}}"}) {
    EXPECT_THROW(RequestLogTemplate t(bad), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace sluice::proxy
