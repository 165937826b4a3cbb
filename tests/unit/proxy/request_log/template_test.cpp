// Knative's request-log templates: the language as Go's text/template has it (actions, variables and their
// scopes, if/with/range/define/template/block, truth), over Knative's RequestLogTemplateInput; the engine
// alone, Go's literals among it, is tested in tests/unit/gotemplate. Every expected string is what Go prints
// for the same template and values.
#include "proxy/request_log/template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "tests/unit/proxy/request_log/fixture.h"

// Counts this thread's heap allocations while `counting` is set (the whole test binary shares this
// operator new; it only counts).
namespace {
thread_local bool counting = false;
thread_local int allocations = 0;
}  // namespace
void* operator new(std::size_t n) {
  if (counting) ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's temporary buffer uses it): every form a delete here frees must
// come from malloc, or ASan reports the mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (counting) ++allocations;
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace sluice::proxy {
namespace {

using testing::RequestLogFixture;

// Knative's DefaultRequestLogTemplate (serving pkg/observability/config.go, 1.19 to 1.23).
constexpr const char* kKnativeDefault =
    R"({"httpRequest": {"requestMethod": "{{.Request.Method}}", "requestUrl": "{{js .Request.RequestURI}}", )"
    R"("requestSize": "{{.Request.ContentLength}}", "status": {{.Response.Code}}, "responseSize": "{{.Response.Size}}", )"
    R"("userAgent": "{{js .Request.UserAgent}}", "remoteIp": "{{js .Request.RemoteAddr}}", "serverIp": "{{.Revision.PodIP}}", )"
    R"("referer": "{{js .Request.Referer}}", "latency": "{{.Response.Latency}}s", "protocol": "{{.Request.Proto}}"}, )"
    R"("traceId": "{{.TraceID}}"})";
// The template config-observability documented before 1.19: the trace id is the header's []string.
constexpr const char* kKnativeOldDefault =
    R"({"httpRequest": {"requestMethod": "{{.Request.Method}}", "requestUrl": "{{js .Request.RequestURI}}", )"
    R"("status": {{.Response.Code}}, "latency": "{{.Response.Latency}}s"}, "traceId": "{{index .Request.Header "X-B3-Traceid"}}"})";

TEST(RequestLogTemplate, KnativesDefaultTemplateByteForByte) {
  RequestLogFixture f;
  f.latency = std::chrono::microseconds(2500);
  EXPECT_EQ(f.raw(kKnativeDefault, "4bf92f3577b34da6a3ce929d0e0e4736"),
            R"({"httpRequest": {"requestMethod": "POST", "requestUrl": "/path?q\u003D\"x\"\u0026a\u003D\u003Cb\u003E", )"
            R"("requestSize": "42", "status": 201, "responseSize": "7", "userAgent": "curl/8.0", "remoteIp": "10.1.2.3:5555", )"
            R"("serverIp": "10.0.0.9", "referer": "", "latency": "0.0025s", "protocol": "HTTP/1.1"}, )"
            R"("traceId": "4bf92f3577b34da6a3ce929d0e0e4736"})"
            "\n");
  EXPECT_EQ(f.render(kKnativeOldDefault),
            R"({"httpRequest": {"requestMethod": "POST", "requestUrl": "/path?q\u003D\"x\"\u0026a\u003D\u003Cb\u003E", )"
            R"("status": 201, "latency": "0.0025s"}, "traceId": "[b3trace]"})");
}

// The default template runs for every request: once its thread's scratch space is warm, a line costs no
// allocation beyond the output's own.
TEST(RequestLogTemplate, KnativesDefaultTemplateRendersWithoutAllocatingOnceWarm) {
  RequestLogFixture f;
  RequestLogTemplate t(kKnativeDefault);
  RequestLogInput in{.record = f.record, .request = &f.req, .end = f.record.start + f.latency, .revision = f.revision,
                     .trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"};
  std::string out;
  out.reserve(1024);
  t.render(out, in);
  out.clear();
  counting = true;
  allocations = 0;
  for (int k = 0; k < 100; ++k) {
    out.clear();
    t.render(out, in);
  }
  counting = false;
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(out.starts_with(R"({"httpRequest": {"requestMethod": "POST")")) << out;
}

TEST(RequestLogTemplate, KnativesNewlineIsAddedOnceAndTrimMarkersCanEatIt) {
  RequestLogFixture f;
  EXPECT_EQ(f.raw("{{.Request.ContentLength}}"), "42\n");
  EXPECT_EQ(f.raw("{{.Request.ContentLength}}\n"), "42\n");
  EXPECT_EQ(f.raw("{{.Request.ContentLength -}}"), "42");
}

TEST(RequestLogTemplate, RequestResponseRevisionFields) {
  RequestLogFixture f;
  EXPECT_EQ(f.render("{{.Revision.Name}}, {{.Revision.Namespace}}, {{.Revision.Service}}, {{.Revision.Configuration}}, "
                     "{{.Revision.PodName}}, {{.Revision.PodIP}}"),
            "hello-00001, default, hello, hello-cfg, hello-00001-deployment-x, 10.0.0.9");
  EXPECT_EQ(f.render("{{.Request.Host}} {{.Request.URL}} {{.Request.URL.Path}} {{.Request.RequestURI}} {{.Response.Latency}}"),
            "hello.default.example.com /path?q=\"x\"&a=<b> /path /path?q=\"x\"&a=<b> 1.234");
  EXPECT_EQ(f.render("{{.Request.ContentLength}} {{.Request.ProtoMajor}}.{{.Request.ProtoMinor}} {{.Request.Close}} "
                     "{{.Request.TransferEncoding}} {{.Request.TLS}} {{.Request.Form}} {{.Request.ProtoAtLeast 1 1}}"),
            "42 1.1 false [] <nil> map[] true");
  EXPECT_EQ(f.render("{{.Response}} {{.Response.Code}} {{.Response.Size}} [{{.TraceID}}]"), "{201 7 1.234} 201 7 []");
  EXPECT_EQ(f.render("{{.Request.UserAgent}} [{{.Request.Referer}}] {{.Request.RemoteAddr}}"), "curl/8.0 [] 10.1.2.3:5555");
}

TEST(RequestLogTemplate, HeadersAreCanonicalMapsOfLists) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{index .Request.Header "X-Custom"}} {{index .Request.Header "X-Custom" 1}})"), "[one two] two");
  EXPECT_EQ(f.render(R"({{index .Request.Header "x-custom"}})"), "[]");  // not canonical: Go finds nothing
  EXPECT_EQ(f.render(R"({{index .Request.Header "Host"}})"), "[]");      // Go's server moves Host out
  EXPECT_EQ(f.render(R"({{.Request.Header.Get "x-custom"}} {{.Request.Header.Values "X-CUSTOM"}})"), "one [one two]");
  EXPECT_EQ(f.render("{{.Request.Header.Accept}}|{{.Request.Header.Nope.Deeper}}"), "<no value>|<no value>");
  EXPECT_EQ(f.render("{{.Request.Header}}"),
            "map[Content-Length:[42] User-Agent:[curl/8.0] X-B3-Traceid:[b3trace] X-Custom:[one two]]");
}

TEST(RequestLogTemplate, UrlPartsAndQuery) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{.Request.URL.RawQuery}} {{.Request.URL.String}} {{.Request.URL.Query.Get "a"}} )"
                     R"({{.Request.URL.Query.Encode}} {{.Request.URL.Query}} [{{.Request.URL.Host}}])"),
            R"(q="x"&a=<b> /path?q="x"&a=<b> <b> a=%3Cb%3E&q=%22x%22 map[a:[<b>] q:["x"]] [])");
  f.req.target("/a%2Fb%20c?x=1&x=2&y");
  EXPECT_EQ(f.render("{{.Request.URL.Path}}|{{.Request.URL.RawPath}}|{{.Request.URL}}|{{.Request.URL.EscapedPath}}|"
                     "{{.Request.URL.Query}}"),
            "/a/b c|/a%2Fb%20c|/a%2Fb%20c?x=1&x=2&y|/a%2Fb%20c|map[x:[1 2] y:[]]");
  f.req.target("/sp ace<>");  // not Go's escaping: URL prints it escaped, RequestURI as it came
  EXPECT_EQ(f.render("{{.Request.URL}} {{.Request.RequestURI}}"), "/sp%20ace%3C%3E /sp ace<>");
}

TEST(RequestLogTemplate, VariablesAndTheirScopes) {
  RequestLogFixture f;
  EXPECT_EQ(f.render("{{$x := .Response.Code}}{{$x}} {{$m := .Request.Method}}{{if true}}{{$m = \"GET\"}}{{end}}{{$m}}"),
            "201 GET");
  EXPECT_EQ(f.render("{{$x := 1}}{{if true}}{{$x := 2}}{{$x}}{{end}}{{$x}}"), "21");
  EXPECT_EQ(f.render("{{with $y := .Revision.Name}}{{$y}}{{end}} {{with .Response}}{{.Code}} {{$.Revision.Name}}{{end}}"),
            "hello-00001 201 hello-00001");
  // In Go the else branch sees the variable by name only if it was pushed: the then branch's never was.
  EXPECT_EQ(f.render("{{$v := \"outer\"}}{{if false}}{{$v := \"inner\"}}{{else}}{{$v}}{{end}}"), "outer");
  EXPECT_EQ(f.render("{{$x = 1}}"), RequestLogFixture::kErrorLine);  // Go: undefined variable, when run
}

TEST(RequestLogTemplate, IfWithElseChains) {
  RequestLogFixture f;
  EXPECT_EQ(f.render("{{if eq .Response.Code 200}}ok{{else if eq .Response.Code 201}}created{{else}}other{{end}}"),
            "created");
  EXPECT_EQ(f.render(R"({{with .Request.Header.Get "X-Missing"}}has {{.}}{{else with .Revision.Service}}svc {{.}})"
                     R"({{else}}none{{end}})"),
            "svc hello");
  EXPECT_EQ(f.render(R"({{with ""}}x{{else}}empty{{end}})"), "empty");
}

TEST(RequestLogTemplate, GoTruth) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{if ""}}a{{else}}b{{end}}{{if 0}}a{{else}}b{{end}}{{if 0.0}}a{{else}}b{{end}})"
                     R"({{if index .Request.Header "X-None"}}a{{else}}b{{end}}{{if .Request.Form}}a{{else}}b{{end}})"
                     R"({{if .Request.TLS}}a{{else}}b{{end}}{{if .Request}}a{{end}})"
                     R"({{if .Request.Header}}a{{end}}{{if "0"}}a{{end}})"),
            "bbbbbbaaa");
  EXPECT_EQ(f.render("{{if nil}}{{end}}"), RequestLogFixture::kErrorLine);  // nil is not a command
}

TEST(RequestLogTemplate, RangeOverMapsSlicesAndInts) {
  RequestLogFixture f;
  EXPECT_EQ(f.render("{{range $k, $v := .Request.Header}}{{$k}}={{$v}};{{end}}"),
            "Content-Length=[42];User-Agent=[curl/8.0];X-B3-Traceid=[b3trace];X-Custom=[one two];");
  EXPECT_EQ(f.render(R"({{range $i, $v := index .Request.Header "X-Custom"}}{{$i}}:{{$v}} {{end}})"), "0:one 1:two ");
  EXPECT_EQ(f.render(R"({{range index .Request.Header "X-Custom"}}[{{.}}]{{end}})"), "[one][two]");
  EXPECT_EQ(f.render("{{range $v := .Request.URL.Query}}{{$v}}{{end}}"), "[<b>][\"x\"]");
  EXPECT_EQ(f.render("{{range 3}}{{.}}{{end}} {{range $v := 2}}{{$v}},{{end}}"), "012 0,1,");
  EXPECT_EQ(f.render(R"({{range index .Request.Header "X-None"}}x{{else}}empty{{end}} {{range 0}}x{{else}}none{{end}})"),
            "empty none");
  EXPECT_EQ(f.render(R"({{range $k, $v := .Request.Header}}{{if eq $k "User-Agent"}}{{continue}}{{end}})"
                     R"({{if eq $k "X-Custom"}}{{break}}{{end}}{{$k}} {{end}})"),
            "Content-Length X-B3-Traceid ");
  EXPECT_EQ(f.render("{{range $i, $v := 3}}{{end}}"), RequestLogFixture::kErrorLine);  // an int gives one value
  EXPECT_EQ(f.render("{{range .Response}}{{end}}"), RequestLogFixture::kErrorLine);
}

TEST(RequestLogTemplate, DefineTemplateBlock) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{define "rev"}}{{.Name}}/{{.Namespace}}{{end}}{{template "rev" .Revision}})"),
            "hello-00001/default");
  EXPECT_EQ(f.render(R"({{block "code" .Response}}{{.Code}}{{end}} done)"), "201 done");
  EXPECT_EQ(f.render(R"({{define "t"}}[{{.}}]{{end}}{{template "t"}})"), "[<no value>]");
  // A blank main template gives way to a {{define}} of its own name (Knative's newline included).
  EXPECT_EQ(f.raw(R"({{define "requestLog"}}only {{.Response.Code}}{{end}})"), "only 201");
  EXPECT_EQ(f.render(R"({{template "missing"}})"), RequestLogFixture::kErrorLine);
}

TEST(RequestLogTemplate, TrimMarkersCommentsAndMultiLineActions) {
  RequestLogFixture f;
  EXPECT_EQ(f.render("a  {{- .Response.Code -}}  b"), "a201b");
  EXPECT_EQ(f.render("x \n {{- /* a comment */ -}} \n y{{/* another */}}"), "xy");
  EXPECT_EQ(f.render("{{\n  .Response.Code\n}}|{{-3}}|{{ -3 }}"), "201|-3|-3");
}

TEST(RequestLogTemplate, PipelinesAndParentheses) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{.Request.Method | printf "%s-%s" "m"}} {{"x-custom" | .Request.Header.Get}})"), "m-POST one");
  EXPECT_EQ(f.render(R"({{(len .Request.Method) | printf "%03d"}} {{(.Request.URL).Path}} {{.Request.Method | len}})"),
            "004 /path 4");
  EXPECT_EQ(f.render("{{.Response.Code | .Request.Method}}"), RequestLogFixture::kErrorLine);
}

TEST(RequestLogTemplate, AFieldThatDoesNotExistFailsEachLineWithKnativesLine) {
  RequestLogFixture f;
  EXPECT_NO_THROW(RequestLogTemplate t("{{.Request.Nope}}"));  // Go's Parse accepts it
  EXPECT_EQ(f.raw("before {{.Request.Nope}} after"), std::string(RequestLogFixture::kErrorLine) + "\n");
  EXPECT_EQ(f.render("{{.Response.Code.Deeper}}"), RequestLogFixture::kErrorLine);
  EXPECT_EQ(f.render("{{.Request.TLS.Version}}"), RequestLogFixture::kErrorLine);  // nil pointer
}

TEST(RequestLogTemplate, ParseErrorsAreGosAndSayWhere) {
  for (const char* bad :
       {"{{.Request.Method", "{{if .Request.Method}}x", "{{end}}", "{{else}}", "{{nofunc .Request.Method}}",
        "{{\"unterminated}}", "{{}}", "{{$undefined}}", "{{if true}}{{$z := 1}}{{end}}{{$z}}", "{{break}}",
        "{{range 3}}{{else}}{{continue}}{{end}}", R"({{define "a"}}x{{end}}{{define "a"}}y{{end}})", "{{1 | 2}}",
        "{{.Request.Method | \"x\"}}", "{{'ab'}}", "{{1.2.3}}", "{{(1}}", "{{1)}}", "{{with}}{{end}}",
        "{{template .X}}", "{{/* unclosed }}", "{{nil.X}}", "{{$x := 1}}{{define \"t\"}}{{$x}}{{end}}",
        "{{range $a, $b, $c := .}}{{end}}", "{{if 1 else}}", "{{.A\"b\"}}", "{{\"\\q\"}}", "{{1x}}"}) {
    EXPECT_THROW(RequestLogTemplate t(bad), std::invalid_argument) << bad;
  }
  try {
    RequestLogTemplate t("ok\n{{nofunc}}");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "template: requestLog:2: function \"nofunc\" not defined");
  }
}

TEST(RequestLogTemplate, TemplatesGoAcceptsAreAccepted) {
  for (const char* good : {"{{range .Request.Header}}{{end}}", "{{.Request.Method | .Response.Code}}", "{{$x = 1}}",
                           "{{template \"nope\"}}", "{{call .X}}", "{{.Request.Nope.Deeper \"arg\"}}",
                           "{{with $x := 1}}{{$x}}{{end}}", "{{range $i, $e := .X}}{{break}}{{end}}", "{{print}}"}) {
    EXPECT_NO_THROW(RequestLogTemplate t(good)) << good;
  }
}

}  // namespace
}  // namespace sluice::proxy
