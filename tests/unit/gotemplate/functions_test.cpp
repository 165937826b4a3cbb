// text/template's predefined functions and Go's fmt behind print, printf and println, over the person
// model (person_model.h): the expected strings are what Go prints, and the messages what Go's Execute
// returns after its "template: …: executing …" prefix.
#include <gtest/gtest.h>

#include "tests/unit/gotemplate/run.h"

namespace sluice::gotemplate::testing {
namespace {

TEST(GoTemplateFunctions, AndOrNot) {
  EXPECT_EQ(run(R"({{and 1 0 2}}|{{and 1 "x"}}|{{or 0 "" "z"}}|{{or 0 ""}}|{{or 1 .Nope}}|{{and 0 .Nope}}|)"
                R"({{true | and 1}}|{{not 0}}|{{not .Tags}})"),
            "0|x|z||1|0|true|true|false");
  EXPECT_EQ(exec_error("{{and}}"), "wrong number of args for and: want at least 1 got 0");
  EXPECT_EQ(exec_error("{{not 1 2}}"), "wrong number of args for not: want 1 got 2");
}

TEST(GoTemplateFunctions, LenIndexSlice) {
  EXPECT_EQ(run(R"({{len "héllo"}} {{len .Tags}} {{len .Labels}} {{len .Attrs}})"), "6 2 2 1");
  EXPECT_EQ(run(R"({{index "abc" 1}} {{index .Tags 1}} {{index .Labels "app" 0}} {{index .Labels "nope"}})"),
            "98 c++ web []");
  EXPECT_EQ(run(R"({{slice "abcdef" 1 3}} {{slice "abcdef" 2}} {{slice .Tags 1}} {{printf "%T" (index "a" 0)}})"),
            "bc cdef [c++] uint8");
  EXPECT_EQ(exec_error(R"({{index "abc" 3}})"), "index out of range: 3");
  EXPECT_EQ(exec_error("{{index .Labels 1}}"), "value has type int; should be string");
  EXPECT_EQ(exec_error("{{index 1 1}}"), "can't index item of type int");
  EXPECT_EQ(exec_error("{{index .Friend 1}}"), "index of nil pointer");
  EXPECT_EQ(exec_error(R"({{slice "abc" 2 1}})"), "invalid slice index: 2 > 1");
  EXPECT_EQ(exec_error(R"({{slice "abc" 1 2 3}})"), "cannot 3-index slice a string");
  EXPECT_EQ(exec_error("{{len 3}}"), "len of type int");
  EXPECT_EQ(exec_error("{{len .Friend}}"), "len of nil pointer");
}

TEST(GoTemplateFunctions, Comparisons) {
  EXPECT_EQ(run(R"({{eq .Age 42}} {{eq .Name "Bob" "Ann"}} {{ne 1 2}} {{lt 1 2}} {{le 2 2}} {{gt "b" "a"}} )"
                R"({{ge 1.5 2.5}} {{eq (index "a" 0) 97}} {{eq .Friend nil}} {{eq .Home .Home}} {{eq .Labels.nope nil}})"),
            "true true true true true true false true true true true");
  EXPECT_EQ(exec_error("{{eq 1.5 1}}"), "incompatible types for comparison");
  EXPECT_EQ(exec_error("{{lt true false}}"), "invalid type for comparison");
  EXPECT_EQ(exec_error("{{eq .Labels .Labels}}"), "non-comparable type main.Labels");
  EXPECT_EQ(exec_error("{{eq 1}}"), "missing argument for comparison");
  EXPECT_EQ(exec_error("{{call .Name}}"), "non-function of type string");
}

TEST(GoTemplateFunctions, PrintAndPrintln) {
  EXPECT_EQ(run(R"({{print "a" 1 2 "b" true}}|{{print}}|{{print .Home}}|{{print nil}})"), "a1 2btrue||Oslo, NO|<nil>");
  EXPECT_EQ(run(R"({{println "a" 1}})"), "a 1\n");
}

TEST(GoTemplateFunctions, PrintfIntegersAndStrings) {
  EXPECT_EQ(run(R"({{printf "%5d|%-5d|%05d|%x|%X|%o|%b|%+d|%O|%x" 42 42 42 255 255 8 5 3 8 -255}})"),
            "   42|42   |00042|ff|FF|10|101|+3|0o10|-ff");
  EXPECT_EQ(run(R"({{printf "%s|%q|%v|%10s|%-4s|%.2s|%x|% x|%#x" "hi" "a\"b" "v" "right" "l" "trunc" "hi" "hi" "hi"}})"),
            R"(hi|"a\"b"|v|     right|l   |tr|6869|68 69|0x6869)");
  EXPECT_EQ(run(R"({{printf "%%|%c|%U|%#U|%q|%t" 65 0x1F600 65 'x' true}})"), "%|A|U+1F600|U+0041 'A'|'x'|true");
  EXPECT_EQ(run(R"({{printf "%[2]d %[1]d" 1 2}}|{{printf "%*d|%-*d|%.*f" 4 7 3 8 2 3.14159}})"), "2 1|   7|8  |3.14");
}

TEST(GoTemplateFunctions, PrintfFloats) {
  EXPECT_EQ(run(R"({{printf "%.3f|%e|%g|%v|%6.2f|%G|%08.3f|%+.1e" 3.14159 1234.5678 0.000012345 2.5 3.14159 1e-7 -3.14159 12345.0}})"),
            "3.142|1.234568e+03|1.2345e-05|2.5|  3.14|1E-07|-003.142|+1.2e+04");
  EXPECT_EQ(run(R"({{printf "%x|%v|%.1f|%g" 3.5 0.0 0.05 100000000.0}})"), "0x1.cp+01|0|0.1|1e+08");
}

TEST(GoTemplateFunctions, PrintfComplaintsAsFmtWritesThem) {
  EXPECT_EQ(run(R"({{printf "%d %s" "x"}}|{{printf "%d" 1 2}}|{{printf "%z" 1}}|{{printf "%d" .Labels.nope}}|{{printf "%"}})"),
            "%!d(string=x) %!s(MISSING)|1%!(EXTRA int=2)|%!z(int=1)|%!d(<nil>)|%!(NOVERB)");
  EXPECT_EQ(run(R"({{printf "%d" .Home}}|{{printf "%[3]d" 1}}|{{printf "%t" .Tags}})"),
            "&{%!d(string=Oslo) %!d(string=NO)}|%!d(BADINDEX)|[%!t(string=go) %!t(string=c++)]");
  EXPECT_EQ(exec_error("{{printf}}"), "wrong number of args for printf: want at least 1 got 0");
  EXPECT_EQ(exec_error("{{printf 1}}"), "expected string; found 1");
}

TEST(GoTemplateFunctions, HtmlJsUrlquery) {
  EXPECT_EQ(run(R"({{html "<a href=\"x\">'&'</a>"}})"), "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(run(R"({{js "it's \"q\" <x> & y=1\n"}})"), R"(it\'s \"q\" \u003Cx\u003E \u0026 y\u003D1\u000A)");
  EXPECT_EQ(run(R"({{urlquery "a b&c/d"}} {{.Name | urlquery}} {{urlquery .Labels.nope}} {{html .Age 1}})"),
            "a+b%26c%2Fd Ann %3Cno+value%3E 42 1");
}

}  // namespace
}  // namespace sluice::gotemplate::testing
