// The engine executing templates over a data model (person_model.h): fields, methods and map keys reached
// through the model, pipelines, if/with/range, variables and their scopes, and Go's messages when a
// template fails as it runs.
#include <gtest/gtest.h>

#include "tests/unit/gotemplate/run.h"

namespace sluice::gotemplate::testing {
namespace {

TEST(GoTemplateExec, FieldsMethodsAndMapKeys) {
  EXPECT_EQ(run("{{.Name}} {{.Age}} {{.Tags}} {{.Home.City}} {{.Attrs.k}} {{.Labels.team}} {{.Labels.nope}}"),
            "Ann 42 [go c++] Oslo [v] [core] <no value>");
  EXPECT_EQ(run(R"({{.Greet "Bob"}} {{.Older 8}} {{.Labels.Get "app"}} {{"Cy" | .Greet}})"),
            "Hello Bob, I am Ann 50 web Hello Cy, I am Ann");
  EXPECT_EQ(run("{{$p := .}}{{$p.Home.Country}} {{(.Home).City}} {{$.Name}}"), "NO Oslo Ann");
}

TEST(GoTemplateExec, StructsPrintInFieldOrderAndStringersByTheirMethod) {
  EXPECT_EQ(run("{{.}}"), "{Ann 42 [go c++] <nil> Oslo, NO map[k:[v]] map[app:[web api] team:[core]]}");
  EXPECT_EQ(run("{{.Home}} {{.Friend}}"), "Oslo, NO <nil>");
  EXPECT_EQ(run(R"({{printf "%+v" .Home}}|{{printf "%s" .Home}}|{{printf "%v" .Labels}})"),
            "Oslo, NO|Oslo, NO|map[app:[web api] team:[core]]");
  EXPECT_EQ(run(R"({{printf "%#v" .Tags}}|{{printf "%#v" .Labels}}|{{printf "%T %T %T" . .Labels .Friend}})"),
            R"([]string{"go", "c++"}|main.Labels{"app":[]string{"web", "api"}, "team":[]string{"core"}}|)"
            "*main.Person main.Labels *main.Person");
}

TEST(GoTemplateExec, MissingFieldsAndNilPointersFailAsTheyRun) {
  EXPECT_EQ(exec_error("{{.Nope}}"), "can't evaluate field Nope in type *main.Person");
  EXPECT_EQ(exec_error("{{.Age.Deeper}}"), "can't evaluate field Deeper in type int");
  EXPECT_EQ(exec_error("{{.Friend.Name}}"), "nil pointer evaluating *main.Person.Name");
  EXPECT_EQ(exec_error("{{.Name \"x\"}}"), "Name has arguments but cannot be invoked as function");
  EXPECT_EQ(exec_error("{{.Labels.team \"x\"}}"), "team is not a method but has arguments");
  EXPECT_EQ(exec_error("{{.Greet}}"), "wrong number of args for Greet: want 1 got 0");
  EXPECT_EQ(exec_error("{{.Greet 1}}"), "expected string; found 1");
  EXPECT_EQ(exec_error("{{.Older .Name}}"), "wrong type for value; expected int; got string");
  EXPECT_EQ(exec_error("{{.Age | .Name}}"), "Name has arguments but cannot be invoked as function");
  EXPECT_EQ(exec_error(R"({{template "missing"}})"), "template \"missing\" not defined");
}

TEST(GoTemplateExec, PipelinesPassTheirValueAsTheLastArgument) {
  EXPECT_EQ(run(R"({{.Name | printf "%s-%s" "m"}} {{.Name | len | printf "%03d"}} {{(len .Tags) | printf "%d"}})"),
            "m-Ann 003 2");
  EXPECT_EQ(exec_error("{{1 | .Name}}"), "Name has arguments but cannot be invoked as function");
}

TEST(GoTemplateExec, IfWithElseChainsAndTruth) {
  EXPECT_EQ(run("{{if eq .Age 41}}a{{else if eq .Age 42}}b{{else}}c{{end}}"), "b");
  EXPECT_EQ(run("{{with .Friend}}{{.Name}}{{else with .Home}}{{.City}}{{else}}none{{end}}"), "Oslo");
  EXPECT_EQ(run(R"({{if ""}}a{{else}}b{{end}}{{if 0}}a{{else}}b{{end}}{{if 0.0}}a{{else}}b{{end}})"
                R"({{if .Friend}}a{{else}}b{{end}}{{if .Labels.nope}}a{{else}}b{{end}}{{if .Tags}}a{{end}})"
                R"({{if .Labels}}a{{end}}{{if .Home}}a{{end}}{{if "0"}}a{{end}})"),
            "bbbbbaaaa");
  EXPECT_EQ(exec_error("{{if nil}}{{end}}"), "nil is not a command");
}

TEST(GoTemplateExec, RangeOverSlicesMapsAndInts) {
  EXPECT_EQ(run("{{range $i, $t := .Tags}}{{$i}}:{{$t}} {{end}}|{{range .Tags}}[{{.}}]{{end}}"), "0:go 1:c++ |[go][c++]");
  EXPECT_EQ(run("{{range $k, $v := .Labels}}{{$k}}={{$v}};{{end}}|{{range .Attrs}}{{.}}{{end}}"),
            "app=[web api];team=[core];|[v]");
  EXPECT_EQ(run("{{range 3}}{{.}}{{end}} {{range $v := 2}}{{$v}},{{end}}"), "012 0,1,");
  EXPECT_EQ(run("{{range .Labels.nope}}x{{else}}empty{{end}} {{range 0}}x{{else}}none{{end}}"), "empty none");
  EXPECT_EQ(run("{{range .Tags}}{{if eq . \"go\"}}{{continue}}{{end}}{{.}}{{break}}{{end}}"), "c++");
  EXPECT_EQ(exec_error("{{range $i, $v := 3}}{{end}}"), "can't use 3 to iterate over more than one variable");
  EXPECT_EQ(exec_error("{{range .Home}}{{end}}"), "range can't iterate over *main.Address");
}

TEST(GoTemplateExec, VariablesAndTheirScopes) {
  EXPECT_EQ(run("{{$x := .Age}}{{$x}} {{$m := .Name}}{{if true}}{{$m = \"Bo\"}}{{end}}{{$m}}"), "42 Bo");
  EXPECT_EQ(run("{{$x := 1}}{{if true}}{{$x := 2}}{{$x}}{{end}}{{$x}}"), "21");
  EXPECT_EQ(run("{{with $h := .Home}}{{$h.City}} {{$.Name}}{{end}}"), "Oslo Ann");
  EXPECT_EQ(run("{{$v := \"outer\"}}{{if false}}{{$v := \"inner\"}}{{else}}{{$v}}{{end}}"), "outer");
  // A {{template}} call sees only its own $.
  EXPECT_EQ(run(R"({{define "t"}}{{$.City}}{{end}}{{$x := 1}}{{template "t" .Home}})"), "Oslo");
  EXPECT_EQ(exec_error("{{$x = 1}}"), "undefined variable: $x");
}

TEST(GoTemplateExec, OneTemplateRunsAgainOverReusedScratchSpace) {
  const Template t("test", "{{.Greet .Name}} {{.Labels}} {{printf \"%5.1f\" 2.25}}", member_of);
  Scratch scratch;
  for (int k = 0; k < 3; ++k) {
    scratch.reset();
    PersonModel model(scratch);
    std::string out;
    t.execute(out, model, PersonModel::root());
    EXPECT_EQ(out, "Hello Ann, I am Ann map[app:[web api] team:[core]]   2.2");
  }
}

}  // namespace
}  // namespace sluice::gotemplate::testing
