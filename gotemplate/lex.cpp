// Go text/template's lexical rules (text/template/parse/lex.go, read for its behaviour): "{{- " and " -}}"
// trim the white space beside an action, comments are "{{/* */}}" alone in their action, and the words
// inside an action end only at a space, one of ".,|:()" or the closing delimiter.
#include "gotemplate/lex.h"

#include <cctype>
#include <cstdio>

namespace sluice::gotemplate {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
// Go takes Unicode letters and digits; a byte of a multi-byte UTF-8 character counts as a letter here.
bool is_alnum(char c) {
  auto u = static_cast<unsigned char>(c);
  return u == '_' || std::isalnum(u) || u >= 0x80;
}

struct Keyword {
  std::string_view word;
  Tok type;
};
constexpr Keyword kKeywords[] = {
    {"block", Tok::block}, {"break", Tok::break_}, {"continue", Tok::continue_}, {"define", Tok::define},
    {"else", Tok::else_},  {"end", Tok::end},      {"if", Tok::if_},             {"nil", Tok::nil},
    {"range", Tok::range}, {"template", Tok::template_}, {"with", Tok::with},
};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  Lexed run() {
    while (text() && action()) {
    }
    return std::move(out_);
  }

 private:
  // Text up to the next action; false at the end of the input or on an error.
  bool text() {
    for (;;) {
      auto x = s_.find("{{", pos_);
      if (x == std::string_view::npos) {
        if (pos_ < s_.size()) emit(Tok::text, pos_, s_.size());
        emit(Tok::eof, s_.size(), s_.size());
        return false;
      }
      const bool trim = left_trim_at(x + 2);
      auto end = x;
      if (trim)
        while (end > pos_ && is_space(s_[end - 1])) --end;
      if (end > pos_) emit(Tok::text, pos_, end);
      pos_ = x + 2;
      const std::size_t after = trim ? 2 : 0;
      if (s_.substr(pos_ + after).starts_with("/*")) {
        if (!comment(pos_ + after + 2)) return false;
        continue;
      }
      emit(Tok::left_delim, x, pos_);
      pos_ += after;
      paren_ = 0;
      return true;
    }
  }

  bool comment(std::size_t from) {
    auto close = s_.find("*/", from);
    if (close == std::string_view::npos) return fail("unclosed comment", from);
    pos_ = close + 2;
    auto [delim, trim] = right_delim_at(pos_);
    if (!delim) return fail("comment ends before closing delimiter", pos_);
    pos_ += (trim ? 2 : 0) + 2;
    if (trim) skip_space();
    return true;
  }

  // The inside of an action, through its closing delimiter.
  bool action() {
    for (;;) {
      auto [delim, trim] = right_delim_at(pos_);
      if (delim) {
        if (paren_ != 0) return fail("unclosed left paren", pos_);
        if (trim) pos_ += 2;
        emit(Tok::right_delim, pos_, pos_ + 2);
        pos_ += 2;
        if (trim) skip_space();
        return true;
      }
      if (pos_ >= s_.size()) return fail("unclosed action", pos_);
      const std::size_t start = pos_;
      const char c = s_[pos_];
      if (is_space(c)) {
        auto j = pos_;
        while (j < s_.size() && is_space(s_[j])) ++j;
        // A space followed by "-}}" belongs to the trim marker, not to the run of spaces.
        if (j < s_.size() && s_[j] == '-' && s_.substr(j + 1).starts_with("}}")) --j;
        if (j > pos_) emit(Tok::space, pos_, j);
        pos_ = j;
        continue;
      }
      ++pos_;
      bool ok = true;
      switch (c) {
        case '=': emit(Tok::assign, start, pos_); break;
        case ':':
          if (pos_ >= s_.size() || s_[pos_] != '=') return fail("expected :=", start);
          ++pos_;
          emit(Tok::declare, start, pos_);
          break;
        case '|': emit(Tok::pipe, start, pos_); break;
        case '"': ok = quoted(start, '"', Tok::string, "unterminated quoted string"); break;
        case '\'': ok = quoted(start, '\'', Tok::char_constant, "unterminated character constant"); break;
        case '`': {
          auto close = s_.find('`', pos_);
          if (close == std::string_view::npos) return fail("unterminated raw quoted string", start);
          pos_ = close + 1;
          emit(Tok::raw_string, start, pos_);
          break;
        }
        case '$': ok = field_or_variable(start, Tok::variable); break;
        case '(':
          ++paren_;
          emit(Tok::left_paren, start, pos_);
          break;
        case ')':
          if (--paren_ < 0) return fail("unexpected right paren", start);
          emit(Tok::right_paren, start, pos_);
          break;
        default:
          if (c == '.' && pos_ < s_.size() && !std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
            ok = field_or_variable(start, Tok::field);
          } else if (c == '.' || c == '+' || c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
            pos_ = start;
            ok = number(start);
          } else if (is_alnum(c)) {
            pos_ = start;
            ok = identifier(start);
          } else if (c > ' ' && c < 0x7f) {
            emit(Tok::char_, start, pos_);
          } else {
            char msg[64];
            std::snprintf(msg, sizeof msg, "unrecognized character in action: U+%04X",
                          static_cast<unsigned>(static_cast<unsigned char>(c)));
            return fail(msg, start);
          }
      }
      if (!ok) return false;
    }
  }

  bool quoted(std::size_t start, char quote, Tok type, const char* unterminated) {
    for (;;) {
      if (pos_ >= s_.size()) return fail(unterminated, start);
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size() || s_[pos_] == '\n') return fail(unterminated, start);
        ++pos_;
      } else if (c == '\n') {
        return fail(unterminated, start);
      } else if (c == quote) {
        emit(type, start, pos_);
        return true;
      }
    }
  }

  bool field_or_variable(std::size_t start, Tok type) {
    if (at_terminator(pos_)) {
      emit(type == Tok::variable ? Tok::variable : Tok::dot, start, pos_);
      return true;
    }
    while (pos_ < s_.size() && is_alnum(s_[pos_])) ++pos_;
    if (!at_terminator(pos_)) return bad_character();
    emit(type, start, pos_);
    return true;
  }

  bool identifier(std::size_t start) {
    while (pos_ < s_.size() && is_alnum(s_[pos_])) ++pos_;
    if (!at_terminator(pos_)) return bad_character();
    auto word = s_.substr(start, pos_ - start);
    Tok type = word == "true" || word == "false" ? Tok::boolean : Tok::identifier;
    for (const auto& k : kKeywords)
      if (k.word == word) type = k.type;
    emit(type, start, pos_);
    return true;
  }

  bool number(std::size_t start) {
    if (!scan_number()) return fail("bad number syntax: \"" + std::string(s_.substr(start, pos_ - start)) + "\"", start);
    if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {  // 1+2i: complex, no spaces
      if (!scan_number() || s_[pos_ - 1] != 'i')
        return fail("bad number syntax: \"" + std::string(s_.substr(start, pos_ - start)) + "\"", start);
      emit(Tok::complex, start, pos_);
      return true;
    }
    emit(Tok::number, start, pos_);
    return true;
  }

  bool scan_number() {
    accept("+-");
    std::string_view digits = "0123456789_";
    if (accept("0")) {
      if (accept("xX")) digits = "0123456789abcdefABCDEF_";
      else if (accept("oO")) digits = "01234567_";
      else if (accept("bB")) digits = "01_";
    }
    accept_run(digits);
    if (accept(".")) accept_run(digits);
    if (digits.size() == 11 && accept("eE")) {
      accept("+-");
      accept_run("0123456789_");
    }
    if (digits.size() == 23 && accept("pP")) {
      accept("+-");
      accept_run("0123456789_");
    }
    accept("i");
    if (pos_ < s_.size() && is_alnum(s_[pos_])) {
      ++pos_;
      return false;
    }
    return true;
  }
  bool accept(std::string_view set) {
    if (pos_ < s_.size() && set.find(s_[pos_]) != std::string_view::npos) {
      ++pos_;
      return true;
    }
    return false;
  }
  void accept_run(std::string_view set) {
    while (accept(set)) {
    }
  }

  bool at_terminator(std::size_t p) const {
    if (p >= s_.size()) return true;
    char c = s_[p];
    if (is_space(c)) return true;
    if (std::string_view(".,|:)(").find(c) != std::string_view::npos) return true;
    return s_.substr(p).starts_with("}}");
  }
  bool left_trim_at(std::size_t p) const { return p + 1 < s_.size() && s_[p] == '-' && is_space(s_[p + 1]); }
  std::pair<bool, bool> right_delim_at(std::size_t p) const {
    if (p + 1 < s_.size() && is_space(s_[p]) && s_[p + 1] == '-' && s_.substr(p + 2).starts_with("}}"))
      return {true, true};
    return {s_.substr(p).starts_with("}}"), false};
  }
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  bool bad_character() {
    char msg[64];
    auto c = pos_ < s_.size() ? static_cast<unsigned char>(s_[pos_]) : 0u;
    if (c > ' ' && c < 0x7f) std::snprintf(msg, sizeof msg, "bad character U+%04X '%c'", c, c);
    else std::snprintf(msg, sizeof msg, "bad character U+%04X", c);
    return fail(msg, pos_);
  }
  bool fail(const std::string& message, std::size_t at) {
    out_.error = message;
    emit(Tok::error, at, at);
    return false;
  }

  void emit(Tok type, std::size_t b, std::size_t e) {
    while (line_pos_ < b && line_pos_ < s_.size()) {
      if (s_[line_pos_] == '\n') ++line_;
      ++line_pos_;
    }
    out_.tokens.push_back(Token{type, s_.substr(b, e - b), line_});
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  int paren_ = 0;
  std::size_t line_pos_ = 0;
  int line_ = 1;
  Lexed out_;
};

}  // namespace

Lexed lex(std::string_view text) { return Lexer(text).run(); }

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::eof: return "EOF";
    case Tok::error: return "error";
    case Tok::block:
    case Tok::break_:
    case Tok::continue_:
    case Tok::define:
    case Tok::else_:
    case Tok::end:
    case Tok::if_:
    case Tok::nil:
    case Tok::range:
    case Tok::template_:
    case Tok::with: return "<" + std::string(t.text) + ">";
    default:
      if (t.text.size() > 10) return "\"" + std::string(t.text.substr(0, 10)) + "\"...";
      return "\"" + std::string(t.text) + "\"";
  }
}

}  // namespace sluice::gotemplate
