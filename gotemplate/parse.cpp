// The template parser: Go text/template's grammar (text/template/parse/parse.go, read for its
// behaviour) and its parse-time checks: defined functions, declared variables (scoped to the enclosing
// if/with/range), {{break}}/{{continue}} inside {{range}}, one definition per template name. Field names
// are not checked: Go finds a missing field only when the template runs.
#include <stdexcept>
#include <utility>

#include "gotemplate/lex.h"
#include "gotemplate/program.h"

namespace sluice::gotemplate {
namespace {

constexpr int kMaxDepth = 1000;  // nesting of blocks and parentheses (Go allows more; no template needs it)

struct BuiltinName {
  std::string_view name;
  Builtin builtin;
};
constexpr BuiltinName kBuiltins[] = {
    {"and", Builtin::and_},     {"or", Builtin::or_},         {"not", Builtin::not_},   {"len", Builtin::len},
    {"index", Builtin::index},  {"slice", Builtin::slice},    {"print", Builtin::print}, {"printf", Builtin::printf},
    {"println", Builtin::println}, {"html", Builtin::html},   {"js", Builtin::js},       {"urlquery", Builtin::urlquery},
    {"eq", Builtin::eq},        {"ne", Builtin::ne},          {"lt", Builtin::lt},       {"le", Builtin::le},
    {"gt", Builtin::gt},        {"ge", Builtin::ge},          {"call", Builtin::call},
};

bool is_blank(const NodeList& list) {  // parse.IsEmptyTree
  for (const auto& n : list) {
    if (n.kind != Node::Kind::text) return false;
    for (char c : n.text)
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') return false;
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view name, std::string_view text, MemberOf member_of)
      : lexed_(lex(text)), toks_(lexed_.tokens), member_of_(member_of) {
    program_.name = name;
    program_.variables = {"$"};
  }

  Program run() {
    Tree main;
    tree_ = &main;
    NodeList root;
    while (peek().type != Tok::eof) {
      if (peek().type == Tok::left_delim) {
        const auto save = i_;
        next();
        if (next_non_space().type == Tok::define) {
          definition();
          continue;
        }
        i_ = save;
      }
      auto item = text_or_action();
      if (item.marker != Marker::none) fail(item.marker == Marker::end ? "unexpected {{end}}" : "unexpected {{else}}");
      root.push_back(std::move(item.node));
    }
    add(program_.name, std::move(root));
    return std::move(program_);
  }

 private:
  enum class Marker { none, end, else_ };
  struct Item {
    Marker marker = Marker::none;
    Node node;
  };
  struct Tree {  // what Go keeps per parse.Tree: the variables in scope and the range nesting
    std::vector<int> vars{0};
    int range_depth = 0;
  };

  const Token& peek() const { return toks_[i_]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (t.type == Tok::error) fail(lexed_.error, t);
    if (t.type != Tok::eof) ++i_;
    last_line_ = t.line;
    return t;
  }
  std::size_t non_space(std::size_t j) const {
    while (toks_[j].type == Tok::space) ++j;
    return j;
  }
  const Token& peek_non_space() const { return toks_[non_space(i_)]; }
  const Token& next_non_space() {
    i_ = non_space(i_);
    return next();
  }
  void expect(Tok type, const char* context) {
    const auto& t = next_non_space();
    if (t.type != type) unexpected(t, context);
  }

  // Go names the line of the last token read.
  [[noreturn]] void fail(const std::string& what) const { fail(what, last_line_); }
  [[noreturn]] void fail(const std::string& what, const Token& at) const { fail(what, at.line); }
  [[noreturn]] void fail(const std::string& what, int line) const {
    throw std::invalid_argument("template: " + program_.name + ":" + std::to_string(line) + ": " + what);
  }
  [[noreturn]] void unexpected(const Token& t, const std::string& context) const {
    fail("unexpected " + describe(t) + " in " + context, t);
  }

  void add(const std::string& name, NodeList list) {
    auto it = program_.templates.find(name);
    if (it == program_.templates.end() || is_blank(it->second)) {
      program_.templates[name] = std::move(list);
    } else if (!is_blank(list)) {
      fail("template: multiple definition of template \"" + name + "\"");
    }
  }

  // {{define "name"}} … {{end}}; "define" is past.
  void definition() {
    const auto& t = next_non_space();
    if (t.type != Tok::string && t.type != Tok::raw_string) unexpected(t, "define clause");
    auto name = template_name(t, "define clause");
    expect(Tok::right_delim, "define clause");
    add(name, nested_list("define clause"));
  }

  // A {{define}} or {{block}} body: a tree of its own, with only $ in scope.
  NodeList nested_list(const char* context) {
    Tree tree;
    auto* outer = std::exchange(tree_, &tree);
    auto [list, marker] = item_list();
    if (marker != Marker::end) fail(std::string("unexpected {{else}} in ") + context);
    tree_ = outer;
    return list;
  }

  std::string template_name(const Token& t, const char* context) {
    if (t.type != Tok::string && t.type != Tok::raw_string) unexpected(t, context);
    std::string name;
    if (!unquote(t.text, name)) fail("invalid syntax", t);
    return name;
  }

  std::pair<NodeList, Marker> item_list() {
    NodeList list;
    while (peek_non_space().type != Tok::eof) {
      auto item = text_or_action();
      if (item.marker != Marker::none) return {std::move(list), item.marker};
      list.push_back(std::move(item.node));
    }
    fail("unexpected EOF", peek_non_space());
  }

  Item text_or_action() {
    const auto& t = next_non_space();
    if (t.type == Tok::text) return Item{.node = Node{.kind = Node::Kind::text, .text = std::string(t.text)}};
    if (t.type != Tok::left_delim) unexpected(t, "input");
    return action();
  }

  Item action() {
    const auto& t = next_non_space();
    switch (t.type) {
      case Tok::block: return Item{.node = block()};
      case Tok::break_:
      case Tok::continue_: {
        const bool is_break = t.type == Tok::break_;
        const char* word = is_break ? "{{break}}" : "{{continue}}";
        if (const auto& close = next_non_space(); close.type != Tok::right_delim) unexpected(close, word);
        if (tree_->range_depth == 0) fail(std::string(word) + " outside {{range}}");
        return Item{.node = Node{.kind = is_break ? Node::Kind::break_ : Node::Kind::continue_}};
      }
      case Tok::else_:
        // {{else if …}} and {{else with …}} leave the if/with for the enclosing control to read.
        if (auto k = peek_non_space().type; k == Tok::if_ || k == Tok::with) i_ = non_space(i_);
        else expect(Tok::right_delim, "else");
        return Item{.marker = Marker::else_};
      case Tok::end: expect(Tok::right_delim, "end"); return Item{.marker = Marker::end};
      case Tok::if_: return Item{.node = control(Node::Kind::if_, "if")};
      case Tok::range: return Item{.node = control(Node::Kind::range, "range")};
      case Tok::with: return Item{.node = control(Node::Kind::with, "with")};
      case Tok::template_: {
        Node n{.kind = Node::Kind::template_};
        n.text = template_name(next_non_space(), "template clause");
        if (next_non_space().type != Tok::right_delim) {
          --i_;
          n.pipe = pipeline("template clause", Tok::right_delim);
          n.has_pipe = true;
        }
        return Item{.node = std::move(n)};
      }
      default:
        --i_;
        // Variables declared here stay in scope until the enclosing block ends.
        return Item{.node = Node{.kind = Node::Kind::action, .pipe = pipeline("command", Tok::right_delim)}};
    }
  }

  Node block() {
    Node n{.kind = Node::Kind::template_, .has_pipe = true};
    n.text = template_name(next_non_space(), "block clause");
    n.pipe = pipeline("block clause", Tok::right_delim);
    add(n.text, nested_list("block clause"));
    return n;
  }

  Node control(Node::Kind kind, const char* context) {
    if (++depth_ > kMaxDepth) fail("max expression depth exceeded");
    const auto scope = tree_->vars.size();
    Node n{.kind = kind};
    n.pipe = pipeline(context, Tok::right_delim);
    if (kind == Node::Kind::range) ++tree_->range_depth;
    auto [list, marker] = item_list();
    if (kind == Node::Kind::range) --tree_->range_depth;
    n.list = std::move(list);
    if (marker == Marker::else_) {
      if (kind != Node::Kind::range && peek().type == (kind == Node::Kind::if_ ? Tok::if_ : Tok::with)) {
        next();  // {{else if x}} is {{else}}{{if x}} … {{end}}{{end}}, sharing the one {{end}}
        n.else_list.push_back(control(kind, context));
      } else {
        auto [else_list, end] = item_list();
        if (end != Marker::end) fail("expected end; found {{else}}");
        n.else_list = std::move(else_list);
      }
    }
    tree_->vars.resize(scope);
    --depth_;
    return n;
  }

  int intern(std::string_view name) {
    auto& v = program_.variables;
    for (std::size_t k = 0; k < v.size(); ++k)
      if (v[k] == name) return static_cast<int>(k);
    v.emplace_back(name);
    return static_cast<int>(v.size() - 1);
  }
  void declare(const Token& v, Pipeline& p) {
    p.decl.push_back(intern(v.text));
    tree_->vars.push_back(p.decl.back());
  }

  Pipeline pipeline(const std::string& context, Tok end) {
    Pipeline p;
    for (;;) {  // declarations: $x := …, $x = …, and in a range $i, $v := …
      auto j = non_space(i_);
      if (toks_[j].type != Tok::variable) break;
      const auto& var = toks_[j];
      auto k = non_space(j + 1);
      const auto& after = toks_[k];
      if (after.type == Tok::assign || after.type == Tok::declare) {
        p.is_assign = after.type == Tok::assign;
        i_ = k + 1;
        declare(var, p);
        break;
      }
      if (after.type == Tok::char_ && after.text == ",") {
        i_ = k + 1;
        declare(var, p);
        if (context == "range" && p.decl.size() < 2) {
          auto nt = peek_non_space().type;
          if (nt == Tok::variable || nt == Tok::right_delim || nt == Tok::right_paren) continue;
          fail("range can only initialize variables");
        }
        fail("too many declarations in " + context);
      }
      break;
    }
    for (;;) {
      const auto& t = next_non_space();
      if (t.type == end) break;
      switch (t.type) {
        case Tok::boolean:
        case Tok::char_constant:
        case Tok::complex:
        case Tok::dot:
        case Tok::field:
        case Tok::identifier:
        case Tok::number:
        case Tok::nil:
        case Tok::raw_string:
        case Tok::string:
        case Tok::variable:
        case Tok::left_paren:
          --i_;
          p.commands.push_back(command());
          break;
        default: unexpected(t, context);
      }
    }
    if (p.commands.empty()) fail("missing value for " + context);
    for (std::size_t k = 1; k < p.commands.size(); ++k) {
      switch (p.commands[k].args[0].kind) {
        case Arg::Kind::boolean:
        case Arg::Kind::dot:
        case Arg::Kind::nil:
        case Arg::Kind::number:
        case Arg::Kind::string: fail("non executable command in pipeline stage " + std::to_string(k + 1));
        default: break;
      }
    }
    return p;
  }

  Command command() {
    Command c;
    for (;;) {
      i_ = non_space(i_);
      if (auto a = operand(); a.kind != Kind::none) c.args.push_back(std::move(a.arg));
      const auto& t = next();
      if (t.type == Tok::space) continue;
      if (t.type == Tok::right_delim || t.type == Tok::right_paren) --i_;
      else if (t.type != Tok::pipe) unexpected(t, "operand");
      break;
    }
    if (c.args.empty()) fail("empty command");
    return c;
  }

  enum class Kind { none, some };
  struct MaybeArg {
    Kind kind = Kind::none;
    Arg arg;
  };

  MaybeArg operand() {
    auto term_arg = term();
    if (term_arg.kind == Kind::none || peek().type != Tok::field) return term_arg;
    std::vector<Name> names;
    while (peek().type == Tok::field) {
      auto text = next().text.substr(1);
      names.push_back(Name{member_of_(text), std::string(text)});
    }
    Arg& a = term_arg.arg;
    switch (a.kind) {
      case Arg::Kind::field:
      case Arg::Kind::variable: a.names.insert(a.names.end(), names.begin(), names.end()); return term_arg;
      case Arg::Kind::boolean:
      case Arg::Kind::string:
      case Arg::Kind::number:
      case Arg::Kind::nil:
      case Arg::Kind::dot: fail("unexpected . after term \"" + a.text + "\"");
      default: {
        Arg chain{.kind = Arg::Kind::chain, .text = a.text, .function = a.function, .names = std::move(names),
                  .pipe = a.pipe};
        return MaybeArg{Kind::some, std::move(chain)};
      }
    }
  }

  MaybeArg term() {
    const auto& t = next_non_space();
    Arg a{.text = std::string(t.text)};
    switch (t.type) {
      case Tok::identifier: {
        bool found = false;
        for (const auto& b : kBuiltins)
          if (b.name == t.text) a.function = b.builtin, found = true;
        if (!found) fail("function \"" + a.text + "\" not defined");
        a.kind = Arg::Kind::function;
        break;
      }
      case Tok::dot: a.kind = Arg::Kind::dot; break;
      case Tok::nil: a.kind = Arg::Kind::nil; break;
      case Tok::variable: {
        a.kind = Arg::Kind::variable;
        a.variable = intern(t.text);
        bool in_scope = false;
        for (int v : tree_->vars) in_scope = in_scope || v == a.variable;
        if (!in_scope) fail("undefined variable \"" + a.text + "\"");
        break;
      }
      case Tok::field:
        a.kind = Arg::Kind::field;
        a.names.push_back(Name{member_of_(t.text.substr(1)), std::string(t.text.substr(1))});
        break;
      case Tok::boolean:
        a.kind = Arg::Kind::boolean;
        a.boolean = t.text == "true";
        break;
      case Tok::complex:
      case Tok::char_constant:
      case Tok::number: {
        std::string error;
        if (t.type == Tok::complex || !parse_number(t.text, t.type == Tok::char_constant, a.number, error))
          fail(t.type == Tok::complex ? "complex constants are not supported in request-log templates" : error);
        a.kind = Arg::Kind::number;
        break;
      }
      case Tok::left_paren: {
        if (++depth_ > kMaxDepth) fail("max expression depth exceeded");
        a.kind = Arg::Kind::pipeline;
        a.pipe = std::make_shared<const Pipeline>(pipeline("parenthesized pipeline", Tok::right_paren));
        --depth_;
        break;
      }
      case Tok::string:
      case Tok::raw_string: {
        std::string value;
        if (!unquote(t.text, value)) fail("invalid syntax", t);
        a.kind = Arg::Kind::string;
        a.text = std::move(value);
        break;
      }
      default: --i_; return {};
    }
    return MaybeArg{Kind::some, std::move(a)};
  }

  Lexed lexed_;
  const std::vector<Token>& toks_;
  MemberOf member_of_;
  std::size_t i_ = 0;
  int last_line_ = 1;
  int depth_ = 0;
  Tree* tree_ = nullptr;
  Program program_;
};

}  // namespace

Program parse(std::string_view name, std::string_view text, MemberOf member_of) {
  return Parser(name, text, member_of).run();
}

}  // namespace sluice::gotemplate
