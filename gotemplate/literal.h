// Go's literals as text/template reads them: strconv.Unquote for "…", `…` and '…', and the readings of a
// number constant (parse.NumberNode: whether it is an int, a uint, a float).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::gotemplate {

struct Number {
  bool is_int = false, is_uint = false, is_float = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double f = 0;
  std::string text;  // as written
};

// strconv.Unquote: false when Go says "invalid syntax".
bool unquote(std::string_view quoted, std::string& out);
// A number or character constant; false with Go's message ("illegal number syntax: …") otherwise.
bool parse_number(std::string_view text, bool is_char, Number& out, std::string& error);

// UTF-8 as Go's utf8.DecodeRune reads it: an invalid byte is U+FFFD of width 1.
char32_t decode_rune(std::string_view s, std::size_t& width);
void append_rune(std::string& out, char32_t r);
// unicode.IsPrint, from the categories Go counts as unprintable (controls, format characters, separators
// other than ' ', private use, surrogates); unassigned code points count as printable here.
bool is_print(char32_t r);

}  // namespace sluice::gotemplate
