// The engine's lexer and parser: what Go's template.New(name).Parse accepts, and its messages (the
// template's name and line in each) for what it refuses.
#include <gtest/gtest.h>

#include "tests/unit/gotemplate/run.h"

namespace sluice::gotemplate::testing {
namespace {

TEST(GoTemplateParse, MessagesNameTheTemplateAndTheLine) {
  EXPECT_EQ(parse_error("{{nofunc}}"), "template: test:1: function \"nofunc\" not defined");
  EXPECT_EQ(parse_error("a\nb\n{{nofunc}}"), "template: test:3: function \"nofunc\" not defined");
  EXPECT_EQ(parse_error("{{\n.Name\n|\nnofunc}}"), "template: test:4: function \"nofunc\" not defined");
  try {
    Template t("other", "{{end}}", member_of);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "template: other:1: unexpected {{end}}");
  }
}

TEST(GoTemplateParse, LexerErrors) {
  EXPECT_EQ(parse_error("{{.Name"), "template: test:1: unclosed action");
  EXPECT_EQ(parse_error("{{\"abc}}"), "template: test:1: unterminated quoted string");
  EXPECT_EQ(parse_error("{{`abc}}"), "template: test:1: unterminated raw quoted string");
  EXPECT_EQ(parse_error("{{/* x }}"), "template: test:1: unclosed comment");
  EXPECT_EQ(parse_error("{{(1}}"), "template: test:1: unclosed left paren");
  EXPECT_EQ(parse_error("{{1)}}"), "template: test:1: unexpected right paren");
}

TEST(GoTemplateParse, StructureErrors) {
  EXPECT_EQ(parse_error("{{if .Name}}x"), "template: test:1: unexpected EOF");
  EXPECT_EQ(parse_error("{{end}}"), "template: test:1: unexpected {{end}}");
  EXPECT_EQ(parse_error("{{else}}"), "template: test:1: unexpected {{else}}");
  EXPECT_EQ(parse_error("{{}}"), "template: test:1: missing value for command");
  EXPECT_EQ(parse_error("{{break}}"), "template: test:1: {{break}} outside {{range}}");
  EXPECT_EQ(parse_error("{{range .Tags}}{{else}}{{continue}}{{end}}"), "template: test:1: {{continue}} outside {{range}}");
  EXPECT_EQ(parse_error("{{with}}{{end}}"), "template: test:1: missing value for with");
}

TEST(GoTemplateParse, VariablesMustBeDeclaredInScope) {
  EXPECT_EQ(parse_error("{{$x}}"), "template: test:1: undefined variable \"$x\"");
  EXPECT_EQ(parse_error("{{if true}}{{$z := 1}}{{end}}{{$z}}"), "template: test:1: undefined variable \"$z\"");
  EXPECT_EQ(parse_error("{{$x := 1}}{{define \"t\"}}{{$x}}{{end}}"), "template: test:1: undefined variable \"$x\"");
  EXPECT_EQ(parse_error("{{$x := 1}}{{with $y := 2}}{{$x}}{{$y}}{{end}}"), "(no error)");
}

TEST(GoTemplateParse, RefusedTemplates) {
  for (const char* bad :
       {"{{1 | 2}}", "{{.Name | \"x\"}}", "{{'ab'}}", "{{1.2.3}}", "{{template .X}}", "{{nil.X}}",
        "{{range $a, $b, $c := .}}{{end}}", "{{if 1 else}}", "{{.A\"b\"}}", "{{\"\\q\"}}", "{{1x}}",
        R"({{define "a"}}x{{end}}{{define "a"}}y{{end}})"}) {
    EXPECT_NE(parse_error(bad), "(no error)") << bad;
  }
}

TEST(GoTemplateParse, AcceptedTemplatesLeaveFieldsToExecution) {
  for (const char* good : {"{{.Nope}}", "{{.Nope.Deeper \"arg\"}}", "{{.Name | .Age}}", "{{$x = 1}}",
                           "{{template \"nope\"}}", "{{call .X}}", "{{range $i, $e := .X}}{{break}}{{end}}",
                           "{{print}}", "{{/* comment */}}", "{{- 3 -}}", "{{define \"x\"}}{{end}}"}) {
    EXPECT_EQ(parse_error(good), "(no error)") << good;
  }
}

TEST(GoTemplateParse, DefinitionsAndTheBlankMainTemplate) {
  // A {{define}} of the template's own name takes the place of a blank main template.
  EXPECT_EQ(run("{{define \"test\"}}defined {{.Name}}{{end}}\n"), "defined Ann");
  EXPECT_EQ(run("{{define \"t\"}}[{{.}}]{{end}}{{template \"t\" .Age}}{{block \"b\" .Name}}<{{.}}>{{end}}"),
            "[42]<Ann>");
}

TEST(GoTemplateParse, TrimMarkersAndComments) {
  EXPECT_EQ(run("a  {{- .Age -}}  b"), "a42b");
  EXPECT_EQ(run("x \n {{- /* a comment */ -}} \n y{{/* another */}}"), "xy");
  EXPECT_EQ(run("{{\n  .Age\n}}|{{-3}}|{{ -3 }}"), "42|-3|-3");
}

// Moved here from the request-log tests (unit/proxy), where it ran over Knative's input without reading it.
TEST(GoTemplateParse, LiteralsAsGoReadsThem) {
  EXPECT_EQ(run(R"({{"a\tb\x41\u00e9\101"}}|{{`raw\n`}}|{{'a'}}|{{'\n'}})"), "a\tbA\xC3\xA9" "A|raw\\n|97|10");
  EXPECT_EQ(run("{{0x1F}} {{0o17}} {{017}} {{0b101}} {{1_000}} {{-5}} {{+7}}"), "31 15 15 5 1000 -5 7");
  EXPECT_EQ(run("{{1.5}} {{1e3}} {{.5}} {{0x1p-2}} {{1e6}} {{123456.0}} {{1234567.0}} {{0.00001}} {{0.0001}}"),
            "1.5 1000 0.5 0.25 1e+06 123456 1.234567e+06 1e-05 0.0001");
  EXPECT_EQ(run(R"({{true}} {{false}} {{print nil}} {{printf "%T %T %T %T %T" 1 1.0 "s" true 'x'}})"),
            "true false <nil> int float64 string bool int");
  EXPECT_EQ(exec_error("{{nil}}"), "nil is not a command");
}

}  // namespace
}  // namespace sluice::gotemplate::testing
