// text/template's functions in request-log templates, and Go's fmt behind print/printf/println: the
// expected strings are what Go prints for the same calls, errors included (a failing call makes Knative
// write its "Invalid request log template" line).
#include <gtest/gtest.h>

#include "tests/unit/proxy/request_log/fixture.h"

namespace sluice::proxy {
namespace {

using testing::RequestLogFixture;
constexpr const char* kError = RequestLogFixture::kErrorLine;

TEST(RequestLogFunctions, AndOrShortCircuitAndReturnTheDecidingOperand) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{and 1 0 2}}|{{and 1 "x"}}|{{or 0 "" "z"}}|{{or 0 ""}}|{{or 1 .Request.Nope}}|)"
                     R"({{and 0 .Request.Nope}}|{{and .Request.Header.Nope 1}}|{{true | and 1}})"),
            "0|x|z||1|0|<no value>|true");
  EXPECT_EQ(f.render("{{and}}"), kError);
  EXPECT_EQ(f.render("{{or 0 .Request.Nope}}"), kError);
}

TEST(RequestLogFunctions, NotLenIndexSlice) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{not 0}} {{not "x"}} {{len "héllo"}} {{len .Request.Header}} )"
                     R"({{len (index .Request.Header "X-Custom")}} {{len .Request.URL.Query}})"),
            "true false 6 4 2 2");
  EXPECT_EQ(f.render(R"({{index "abc" 1}} {{index .Request.Header "X-Custom" 0}} {{printf "%T" (index "abc" 1)}})"),
            "98 one uint8");
  EXPECT_EQ(f.render(R"({{slice "abcdef" 1 3}} {{slice "abcdef" 2}} {{slice "abc"}} )"
                     R"({{slice (index .Request.Header "X-Custom") 1}})"),
            "bc cdef abc [two]");
  for (const char* bad : {R"({{index "abc" 3}})", R"({{index .Request.Header 1}})", "{{index 1 1}}", "{{index nil 1}}",
                          R"({{slice "abc" 2 1}})", R"({{slice "abc" 1 2 3}})", "{{len 3}}", "{{len .Response}}",
                          "{{len}}", "{{not 1 2}}"})
    EXPECT_EQ(f.render(bad), kError) << bad;
}

TEST(RequestLogFunctions, PrintAndPrintlnSpaceAsFmtDoes) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{print "a" 1 2 "b" true}}|{{print}}|{{print .Response}})"), "a1 2btrue||&{201 7 1.234}");
  EXPECT_EQ(f.raw(R"({{println "a" 1}})"), "a 1\n\n");
}

TEST(RequestLogFunctions, PrintfIntegersAndStrings) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{printf "%5d|%-5d|%05d|%x|%X|%o|%b|%+d|%O|%x" 42 42 42 255 255 8 5 3 8 -255}})"),
            "   42|42   |00042|ff|FF|10|101|+3|0o10|-ff");
  EXPECT_EQ(f.render(R"({{printf "%s|%q|%v|%10s|%-4s|%.2s|%x|% x|%#x" "hi" "a\"b" "v" "right" "l" "trunc" "hi" "hi" "hi"}})"),
            R"(hi|"a\"b"|v|     right|l   |tr|6869|68 69|0x6869)");
  EXPECT_EQ(f.render(R"({{printf "%%|%c|%U|%#U|%q|%t|%5t" 65 0x1F600 65 'x' true false}})"),
            "%|A|U+1F600|U+0041 'A'|'x'|true|false");
  EXPECT_EQ(f.render(R"({{printf "%[2]d %[1]d" 1 2}}|{{printf "%*d|%-*d|%.*f" 4 7 3 8 2 3.14159}})"), "2 1|   7|8  |3.14");
  EXPECT_EQ(f.render(R"({{printf "%q" "tab\tnul\x00é\u2028"}})"), R"("tab\tnul\x00é\u2028")");
}

TEST(RequestLogFunctions, PrintfFloats) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{printf "%.3f|%e|%g|%v|%6.2f|%G|%08.3f|%+.1e" 3.14159 1234.5678 0.000012345 2.5 3.14159 1e-7 -3.14159 12345.0}})"),
            "3.142|1.234568e+03|1.2345e-05|2.5|  3.14|1E-07|-003.142|+1.2e+04");
  EXPECT_EQ(f.render(R"({{printf "%6.2v|%x|%X|%v|%.1f|%e|%.3g|%g" 3.14159 3.5 -1.0 0.0 0.05 0.0 1.0 100000000.0}})"),
            "   3.1|0x1.cp+01|-0X1P+00|0|0.1|0.000000e+00|1|1e+08");
  EXPECT_EQ(f.render(R"({{printf "%v %v %v" .Response.Latency 1e21 123456789.0}})"), "1.234 1e+21 1.23456789e+08");
}

TEST(RequestLogFunctions, PrintfComplaintsAsFmtWritesThem) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{printf "%d %s" "x"}}|{{printf "%d" 1 2}}|{{printf "%z" 1}}|{{printf "%d" .Request.Header.Nope}}|{{printf "%"}})"),
            "%!d(string=x) %!s(MISSING)|1%!(EXTRA int=2)|%!z(int=1)|%!d(<nil>)|%!(NOVERB)");
  EXPECT_EQ(f.render(R"({{printf "%d" .Response}}|{{printf "%[3]d" 1}})"), "&{201 7 %!d(float64=1.234)}|%!d(BADINDEX)");
  EXPECT_EQ(f.render("{{printf}}"), kError);
  EXPECT_EQ(f.render("{{printf 1}}"), kError);  // the format is a string
}

TEST(RequestLogFunctions, PrintfValuesOfKnativesTypes) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{printf "%v" .Response}}|{{printf "%+v" .Revision}})"),
            "&{201 7 1.234}|&{Name:hello-00001 Namespace:default Service:hello Configuration:hello-cfg "
            "PodName:hello-00001-deployment-x PodIP:10.0.0.9}");
  EXPECT_EQ(f.render(R"({{printf "%v|%s" .Request.Header.Nope .Request.URL}})"), "<nil>|/path?q=\"x\"&a=<b>");
  EXPECT_EQ(f.render(R"({{printf "%T|%T|%T|%T|%T|%T" .Request .Request.Header .Request.URL (index .Request.Header "X") )"
                     R"(.Request.URL.Query .Request.ContentLength}})"),
            "*http.Request|http.Header|*url.URL|[]string|url.Values|int64");
  EXPECT_EQ(f.render(R"({{printf "%#v|%#v|%v" "s" (index .Request.Header "X-Custom") (index .Request.Header "X-Custom")}})"),
            R"("s"|[]string{"one", "two"}|[one two])");
}

TEST(RequestLogFunctions, HtmlJsUrlquery) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{html "<a href=\"x\">'&'</a>"}})"), "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(f.render(R"({{js "it's \"q\" <x> & y=1\n"}})"), R"(it\'s \"q\" \u003Cx\u003E \u0026 y\u003D1\u000A)");
  EXPECT_EQ(f.render(R"({{js "é\u2028\u00a0"}})"), "é\\u2028\\u00A0");
  EXPECT_EQ(f.render(R"({{urlquery "a b&c/d"}} {{.Request.UserAgent | urlquery}})"), "a+b%26c%2Fd curl%2F8.0");
  EXPECT_EQ(f.render(R"({{html .Response}}|{{js 1 2}}|{{urlquery .Request.Header.Nope}}|{{html "a" 1}})"),
            "{201 7 1.234}|1 2|%3Cno+value%3E|a1");
}

TEST(RequestLogFunctions, ComparisonsFollowGosRules) {
  RequestLogFixture f;
  EXPECT_EQ(f.render(R"({{eq .Response.Code 201}} {{eq .Request.Method "GET" "POST"}} {{ne 1 2}} {{lt 1 2}} {{le 2 2}} )"
                     R"({{gt "b" "a"}} {{ge 1.5 2.5}} {{eq (index "a" 0) 97}} {{lt -1 (index "a" 0)}} )"
                     R"({{eq .Request.Header.Nope nil}} {{eq .Request.TLS nil}} {{eq .Response .Response}})"),
            "true true true true true true false true true true true true");
  for (const char* bad : {"{{eq .Response.Latency 1}}", "{{lt true false}}", "{{eq 1}}", R"({{eq 1 "1"}})",
                          "{{eq .Request.Header .Request.Header}}", "{{lt .Request.Header.Nope 1}}", "{{ne 1}}",
                          "{{call .Request.Method}}"})
    EXPECT_EQ(f.render(bad), kError) << bad;
}

TEST(RequestLogFunctions, MethodArgumentsAreCheckedAsGoChecksThem) {
  RequestLogFixture f;
  for (const char* bad : {"{{.Request.Header.Get}}", "{{.Request.Header.Get 1}}", "{{.Request.Header.Get \"a\" \"b\"}}",
                          "{{.Request.ProtoAtLeast 1 .Request.ContentLength}}", "{{.Request.Method \"x\"}}",
                          "{{.Request.Header.Accept \"x\"}}", "{{\"a\" \"b\"}}"})
    EXPECT_EQ(f.render(bad), kError) << bad;
  EXPECT_EQ(f.render("{{.Request.ProtoAtLeast 2 0}} {{.Request.ProtoAtLeast 1 0}}"), "false true");
}

}  // namespace
}  // namespace sluice::proxy
