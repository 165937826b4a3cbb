// Go text/template's lexer: a template's text cut into the tokens Go's parser reads (text, delimiters with
// trim markers, comments dropped, and inside actions: words, literals, variables, fields, punctuation).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::gotemplate {

enum class Tok : std::uint8_t {
  error,  // lexing stops here; the message is Lexed::error
  eof,
  text,
  left_delim,
  right_delim,
  space,
  boolean,
  char_,          // a printable ASCII character Go passes on as is (the parser wants only ',')
  char_constant,  // 'x'
  complex,        // 1+2i
  assign,         // =
  declare,        // :=
  dot,
  field,       // .Name
  identifier,  // a function name
  left_paren,
  right_paren,
  number,
  pipe,
  raw_string,
  string,
  variable,  // $ or $name
  // keywords
  block,
  break_,
  continue_,
  define,
  else_,
  end,
  if_,
  nil,
  range,
  template_,
  with,
};

struct Token {
  Tok type;
  std::string_view text;  // a slice of the template
  int line;
};

struct Lexed {
  std::vector<Token> tokens;  // ends with eof or error
  std::string error;  // what the error token means
};

Lexed lex(std::string_view text);

// How Go names a token in "unexpected X in Y" errors.
std::string describe(const Token& t);

}  // namespace sluice::gotemplate
