// The request-log template parser: Go text/template's lexical rules ({{ }}, trim markers, comments,
// string/raw/number literals, pipelines, parentheses, if/else if/else/end) over Knative's fields.
#include <cctype>
#include <map>
#include <stdexcept>

#include "proxy/request_log/program.h"

namespace sluice::proxy::request_log {
namespace {

const std::map<std::string, Field, std::less<>>& field_names() {
  static const std::map<std::string, Field, std::less<>> names = {
      {".", Field::dot},
      {".TraceID", Field::trace_id},
      {".Request", Field::request},
      {".Request.Method", Field::method},
      {".Request.URL", Field::url},
      {".Request.URL.Path", Field::url_path},
      {".Request.URL.RawQuery", Field::url_raw_query},
      {".Request.Host", Field::host},
      {".Request.Header", Field::header},
      {".Request.Header.Get", Field::header_get},
      {".Request.RemoteAddr", Field::remote_addr},
      {".Request.RequestURI", Field::request_uri},
      {".Request.ContentLength", Field::content_length},
      {".Request.Proto", Field::proto},
      {".Request.ProtoMajor", Field::proto_major},
      {".Request.ProtoMinor", Field::proto_minor},
      {".Request.UserAgent", Field::user_agent},
      {".Request.Referer", Field::referer},
      {".Response", Field::response},
      {".Response.Code", Field::code},
      {".Response.Size", Field::size},
      {".Response.Latency", Field::latency},
      {".Revision", Field::revision},
      {".Revision.Name", Field::rev_name},
      {".Revision.Namespace", Field::rev_namespace},
      {".Revision.Service", Field::rev_service},
      {".Revision.Configuration", Field::rev_configuration},
      {".Revision.PodName", Field::rev_pod_name},
      {".Revision.PodIP", Field::rev_pod_ip},
  };
  return names;
}

bool known_function(std::string_view f) {
  for (std::string_view k : {"js", "html", "urlquery", "index", "len", "print", "printf", "println", "eq", "ne",
                             "lt", "le", "gt", "ge", "not", "and", "or"})
    if (f == k) return true;
  return false;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  NodeList parse_list(bool nested, std::string& ended_by) {
    NodeList out;
    while (pos_ < s_.size()) {
      auto open = s_.find("{{", pos_);
      std::string_view text = s_.substr(pos_, open == std::string_view::npos ? std::string_view::npos : open - pos_);
      pos_ = open == std::string_view::npos ? s_.size() : open;
      bool trim_left = open != std::string_view::npos && open + 2 < s_.size() && s_[open + 2] == '-' &&
                       open + 3 < s_.size() && std::isspace(static_cast<unsigned char>(s_[open + 3]));
      if (trim_left) text = rtrim(text);
      if (trim_next_) text = ltrim(text);
      trim_next_ = false;
      if (!text.empty()) out.push_back(Node{.kind = Node::Kind::text, .text = std::string(text)});
      if (open == std::string_view::npos) break;
      action_start_ = open;
      pos_ = open + 2 + (trim_left ? 2 : 0);
      auto close = find_close();
      std::string_view body = s_.substr(pos_, close.first - pos_);
      pos_ = close.second;
      trim_next_ = close.trimmed;
      body = trim(body);
      if (body.starts_with("/*")) {
        if (!body.ends_with("*/")) fail("unclosed comment");
        continue;
      }
      Lexer lx{body, action_start_};
      auto word = lx.peek_word();
      if (word == "end" || word == "else") {
        if (!nested) fail("unexpected {{" + std::string(word) + "}}");
        ended_by = std::string(body);
        return out;
      }
      if (word == "if") {
        lx.take_word();
        Node n{.kind = Node::Kind::if_};
        n.pipeline = parse_pipeline(lx, false);
        parse_if_tail(n);
        out.push_back(std::move(n));
        continue;
      }
      for (std::string_view k : {"range", "with", "define", "template", "block", "break", "continue"})
        if (word == k) fail("{{" + std::string(k) + "}} is not supported in request-log templates");
      Node n{.kind = Node::Kind::action};
      n.pipeline = parse_pipeline(lx, false);
      if (n.pipeline.commands.empty()) fail("missing value for command");
      out.push_back(std::move(n));
    }
    if (nested) fail("unexpected end of template: an {{if}} has no {{end}}");
    return out;
  }

 private:
  struct Close {
    std::size_t first, second;
    bool trimmed;
  };
  struct Lexer {
    std::string_view s;
    std::size_t base;
    std::size_t i = 0;
    void skip_space() {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    }
    std::string_view peek_word() {
      skip_space();
      auto j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      return s.substr(i, j - i);
    }
    std::string_view take_word() {
      auto w = peek_word();
      i += w.size();
      return w;
    }
    bool done() {
      skip_space();
      return i >= s.size();
    }
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(what + " (in the action at byte " + std::to_string(action_start_) + ")");
  }

  static std::string_view ltrim(std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
    return v;
  }
  static std::string_view rtrim(std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    return v;
  }
  static std::string_view trim(std::string_view v) { return rtrim(ltrim(v)); }

  // The end of the action that starts at pos_, skipping "}}" inside string literals.
  Close find_close() {
    char quote = 0;
    for (auto i = pos_; i < s_.size(); ++i) {
      char c = s_[i];
      if (quote) {
        if (c == '\\' && quote == '"') ++i;
        else if (c == quote) quote = 0;
        continue;
      }
      if (c == '"' || c == '`' || c == '\'') {
        quote = c;
        continue;
      }
      if (c == '}' && i + 1 < s_.size() && s_[i + 1] == '}') {
        bool trimmed = i >= 2 && s_[i - 1] == '-' && std::isspace(static_cast<unsigned char>(s_[i - 2]));
        return {trimmed ? i - 1 : i, i + 2, trimmed};
      }
    }
    fail("unclosed action: no }}");
  }

  void parse_if_tail(Node& n) {
    std::string ended;
    n.then = parse_list(true, ended);
    if (ended == "end") return;
    Lexer lx{ended, action_start_};
    lx.take_word();  // else
    if (lx.peek_word() == "if") {  // {{else if …}}: a nested if in the else branch
      lx.take_word();
      Node inner{.kind = Node::Kind::if_};
      inner.pipeline = parse_pipeline(lx, false);
      parse_if_tail(inner);
      n.otherwise.push_back(std::move(inner));
      return;
    }
    if (!lx.done()) fail("unexpected words after {{else}}");
    n.otherwise = parse_list(true, ended);
    if (ended != "end") fail("expected {{end}} after {{else}}");
  }

  Pipeline parse_pipeline(Lexer& lx, bool in_parens) {
    Pipeline p;
    while (true) {
      Command c;
      while (true) {
        lx.skip_space();
        if (lx.i >= lx.s.size()) break;
        char ch = lx.s[lx.i];
        if (ch == '|' || ch == ')') break;
        if (c.function.empty() && c.operands.empty()) {
          auto save = lx.i;
          auto word = lx.take_word();
          if (known_function(word)) {
            c.function = std::string(word);
            continue;
          }
          lx.i = save;
        }
        c.operands.push_back(parse_operand(lx));
      }
      if (c.function.empty() && c.operands.empty()) fail("missing value for command");
      if (!c.function.empty() && p.commands.empty() && c.operands.empty() && c.function != "print" &&
          c.function != "println")
        fail("function " + c.function + " needs arguments");
      if (c.function.empty() && c.operands.size() > 1 &&
          !(c.operands[0].kind == Operand::Kind::field && c.operands[0].field == Field::header_get))
        fail("only functions and .Request.Header.Get take arguments");
      if (!p.commands.empty() && c.function.empty()) fail("a pipeline stage after | must be a function");
      if (c.function.empty() && c.operands[0].kind == Operand::Kind::field &&
          c.operands[0].field == Field::header_get && c.operands.size() != 2)
        fail(".Request.Header.Get takes one argument");
      p.commands.push_back(std::move(c));
      lx.skip_space();
      if (lx.i < lx.s.size() && lx.s[lx.i] == '|') {
        ++lx.i;
        continue;
      }
      if (lx.i < lx.s.size() && lx.s[lx.i] == ')') {
        if (!in_parens) fail("unexpected )");
        ++lx.i;
      } else if (in_parens) {
        fail("unclosed (");
      }
      return p;
    }
  }

  Operand parse_operand(Lexer& lx) {
    auto& s = lx.s;
    auto& i = lx.i;
    char ch = s[i];
    Operand o;
    if (ch == '(') {
      ++i;
      o.kind = Operand::Kind::pipeline;
      o.nested = std::make_shared<Pipeline>(parse_pipeline(lx, true));
      return o;
    }
    if (ch == '.') {
      auto j = i + 1;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' || s[j] == '.')) ++j;
      auto path = s.substr(i, j - i);
      i = j;
      auto it = field_names().find(path);
      if (it == field_names().end())
        fail("field " + std::string(path) + " is not one sluice provides (see the README's request-log fields)");
      o.kind = Operand::Kind::field;
      o.field = it->second;
      return o;
    }
    if (ch == '"' || ch == '`') {
      o.kind = Operand::Kind::string;
      o.text = parse_string(lx);
      return o;
    }
    if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '-' || ch == '+') {
      auto j = i + 1;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
      std::string num(s.substr(i, j - i));
      i = j;
      try {
        std::size_t used = 0;
        if (num.find_first_of(".eE") == std::string::npos) {
          o.kind = Operand::Kind::integer;
          o.integer = std::stoll(num, &used, 0);
        } else {
          o.kind = Operand::Kind::real;
          o.real = std::stod(num, &used);
        }
        if (used != num.size()) throw std::invalid_argument(num);
      } catch (const std::exception&) {
        fail("bad number syntax: " + num);
      }
      return o;
    }
    auto word = lx.take_word();
    if (word.empty()) fail(std::string("unexpected character '") + ch + "'");
    if (word == "true" || word == "false") {
      o.kind = Operand::Kind::boolean;
      o.boolean = word == "true";
      return o;
    }
    if (word == "nil") return o;
    if (known_function(word)) fail("function " + std::string(word) + " can only start a command (use parentheses)");
    fail("function \"" + std::string(word) + "\" not defined");
  }

  std::string parse_string(Lexer& lx) {
    auto& s = lx.s;
    auto& i = lx.i;
    char q = s[i++];
    std::string out;
    while (i < s.size() && s[i] != q) {
      char c = s[i++];
      if (q == '"' && c == '\\' && i < s.size()) {
        char e = s[i++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case '\\': out += '\\'; break;
          case '"': out += '"'; break;
          default: fail(std::string("unsupported escape \\") + e);
        }
        continue;
      }
      out += c;
    }
    if (i >= s.size()) fail("unterminated quoted string");
    ++i;
    return out;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::size_t action_start_ = 0;
  bool trim_next_ = false;
};

}  // namespace

Program parse(std::string_view text) {
  Parser p(text);
  std::string ended;
  return Program{p.parse_list(false, ended)};
}

}  // namespace sluice::proxy::request_log
