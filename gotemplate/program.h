// The parsed form of a template (internal to gotemplate/): Go text/template's parse tree, with function
// names resolved to an enum and field names to the data model's numbers once, when it is parsed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gotemplate/data.h"
#include "gotemplate/literal.h"
#include "gotemplate/template.h"

namespace sluice::gotemplate {

// text/template's predefined functions.
enum class Builtin : std::uint8_t {
  and_, or_, not_, len, index, slice, print, printf, println, html, js, urlquery, eq, ne, lt, le, gt, ge, call,
};

struct Name {
  MemberId member;
  std::string text;
};

struct Pipeline;

// An operand of a command (Go's parse nodes that can be arguments).
struct Arg {
  enum class Kind : std::uint8_t { dot, nil, boolean, number, string, field, variable, chain, function, pipeline };
  Kind kind = Kind::nil;
  bool boolean = false;
  Number number;
  std::string text;         // string: its value; for messages, the operand as written
  int variable = -1;        // variable: the index of its name in Program::variables ("$" is 0)
  Builtin function{};       // function, or a chain's base when `pipe` is empty
  std::vector<Name> names;  // field: .A.B; variable: $x.A.B (after the variable); chain: (…).A.B
  std::shared_ptr<const Pipeline> pipe;  // pipeline; chain: its base when it is a pipeline
};

struct Command {
  std::vector<Arg> args;  // args[0]: the function, field, variable, ... the others are its arguments
};

struct Pipeline {
  std::vector<int> decl;  // variables declared ($x := …) or assigned ($x = …)
  bool is_assign = false;
  std::vector<Command> commands;  // each one's result is the last argument of the next
};

struct Node;
using NodeList = std::vector<Node>;

struct Node {
  enum class Kind : std::uint8_t { text, action, if_, with, range, template_, break_, continue_ };
  Kind kind = Kind::text;
  std::string text;    // text; template_: the name called
  bool has_pipe = false;  // template_: {{template "x" pipeline}}
  Pipeline pipe;
  NodeList list, else_list;
};

struct Program {
  std::string name;                                         // the template's own, as template.New names it
  std::map<std::string, NodeList, std::less<>> templates;  // `name` and the {{define}}d ones
  std::vector<std::string> variables;                       // names, "$" first
};

// Parses `text` as template.New(name).Parse does; throws std::invalid_argument with Go's message
// ("template: requestLog:1: unexpected EOF").
Program parse(std::string_view name, std::string_view text, MemberOf member_of);

}  // namespace sluice::gotemplate
