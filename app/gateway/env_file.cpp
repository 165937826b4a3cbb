// Environment files; see env_file.h.
#include "app/gateway/env_file.h"

#include <cstdlib>

namespace sluice::app::gateway {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool name_char(char c, bool first) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') return true;
  return !first && ((c >= '0' && c <= '9') || c == '.' || c == '-');
}

class Reader {
 public:
  Reader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  EnvFileResult read() {
    while (at_ < text_.size()) entry();
    return std::move(out_);
  }

 private:
  char peek() const { return at_ < text_.size() ? text_[at_] : '\n'; }
  bool line_end() const { return at_ >= text_.size() || text_[at_] == '\n'; }
  void skip_blanks() {
    while (at_ < text_.size() && blank(text_[at_])) ++at_;
  }
  void next_line() {
    while (!line_end()) ++at_;
    if (at_ < text_.size()) ++at_;
    ++line_;
  }
  void error(int line, const std::string& reason) {
    out_.errors.push_back(source_ + ":" + std::to_string(line) + ": " + reason);
  }
  // What may follow a value or a name: blanks, then a comment or the line's end.
  bool rest_is_comment() {
    skip_blanks();
    return line_end() || peek() == '#';
  }

  void entry() {
    skip_blanks();
    if (line_end() || peek() == '#') return next_line();
    const int line = line_;
    if (text_.compare(at_, 7, "export ") == 0 || text_.compare(at_, 7, "export\t") == 0) {
      at_ += 7;
      skip_blanks();
    }
    const auto name_start = at_;
    while (at_ < text_.size() && name_char(text_[at_], at_ == name_start)) ++at_;
    std::string name = text_.substr(name_start, at_ - name_start);
    const bool has_name = !name.empty() && (blank(peek()) || peek() == '=' || line_end());
    if (!has_name) {
      error(line, "expected NAME=value (a name is letters, digits, '_', '.' and '-', not starting with a digit)");
      return next_line();
    }
    skip_blanks();
    if (line_end() || peek() == '#') {  // `NAME` alone: the gateway's own value, if it has one
      if (const char* v = std::getenv(name.c_str())) out_.vars.emplace_back(name, v);
      return next_line();
    }
    if (peek() != '=') {
      error(line, name + ": expected '=' after the name");
      return next_line();
    }
    ++at_;
    const auto before = at_;
    skip_blanks();
    std::string value;
    if (peek() == '"' || peek() == '\'') {
      if (!quoted(name, line, value)) return;
    } else if (peek() == '#' && at_ > before) {
      // `NAME= # note`: empty, the rest a comment
    } else {
      const auto start = at_;
      while (!line_end() && !(text_[at_] == '#' && at_ > start && blank(text_[at_ - 1]))) ++at_;
      value = text_.substr(start, at_ - start);
      while (!value.empty() && blank(value.back())) value.pop_back();
    }
    out_.vars.emplace_back(std::move(name), std::move(value));
    next_line();
  }

  // A quoted value from the opening quote; false (and the error said) when it is not closed.
  bool quoted(const std::string& name, int line, std::string& value) {
    const char quote = text_[at_++];
    for (;; ++at_) {
      if (at_ >= text_.size()) {
        error(line, name + ": the quoted value has no closing " + std::string(1, quote));
        return false;
      }
      char c = text_[at_];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (quote == '"' && c == '\\' && at_ + 1 < text_.size()) {
        const char e = text_[++at_];
        switch (e) {
          case 'n': c = '\n'; break;
          case 'r': c = '\r'; break;
          case 't': c = '\t'; break;
          case '\\': case '"': case '$': c = e; break;
          default: value += '\\'; c = e;
        }
        if (e == '\n') ++line_;
      }
      value += c;
    }
    ++at_;
    if (!rest_is_comment()) {
      error(line_, name + ": unexpected text after the closing " + std::string(1, quote));
      next_line();
      return false;
    }
    return true;
  }

  const std::string& text_;
  const std::string& source_;
  std::size_t at_ = 0;
  int line_ = 1;
  EnvFileResult out_;
};

}  // namespace

EnvFileResult parse_env_file(const std::string& text, const std::string& source) {
  return Reader(text, source).read();
}

}  // namespace sluice::app::gateway
