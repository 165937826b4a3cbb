// Go's literal syntax (strconv.Unquote, strconv.ParseInt/ParseUint/ParseFloat with base 0, parse.NumberNode),
// written from the Go specification and those functions' documented behaviour.
#include "gotemplate/literal.h"

#include <charconv>
#include <cmath>

namespace sluice::gotemplate {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// strconv.UnquoteChar: one character or escape of a quoted literal; false on a syntax error.
bool unquote_char(std::string_view& s, char quote, char32_t& value, bool& multibyte) {
  multibyte = false;
  if (s.empty()) return false;
  const auto c = static_cast<unsigned char>(s[0]);
  if (c == static_cast<unsigned char>(quote)) return false;
  if (c >= 0x80) {
    std::size_t w = 0;
    value = decode_rune(s, w);
    s.remove_prefix(w);
    multibyte = true;
    return true;
  }
  if (c != '\\') {
    value = c;
    s.remove_prefix(1);
    return true;
  }
  if (s.size() < 2) return false;
  const char e = s[1];
  s.remove_prefix(2);
  switch (e) {
    case 'a': value = '\a'; return true;
    case 'b': value = '\b'; return true;
    case 'f': value = '\f'; return true;
    case 'n': value = '\n'; return true;
    case 'r': value = '\r'; return true;
    case 't': value = '\t'; return true;
    case 'v': value = '\v'; return true;
    case '\\': value = '\\'; return true;
    case '\'':
    case '"':
      if (e != quote) return false;
      value = static_cast<char32_t>(e);
      return true;
    case 'x':
    case 'u':
    case 'U': {
      const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      if (s.size() < n) return false;
      char32_t v = 0;
      for (std::size_t j = 0; j < n; ++j) {
        int x = hex_value(s[j]);
        if (x < 0) return false;
        v = v << 4 | static_cast<char32_t>(x);
      }
      s.remove_prefix(n);
      if (e != 'x' && (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))) return false;
      value = v;
      multibyte = e != 'x';  // \x is one byte, UTF-8 or not
      return true;
    }
    default:
      if (e < '0' || e > '7' || s.size() < 2) return false;
      char32_t v = static_cast<char32_t>(e - '0');
      for (int j = 0; j < 2; ++j) {
        if (s[j] < '0' || s[j] > '7') return false;
        v = v << 3 | static_cast<char32_t>(s[j] - '0');
      }
      s.remove_prefix(2);
      if (v > 255) return false;
      value = v;
      return true;
  }
}

// strconv's underscoreOK: "_" only between digits, or between a base prefix and a digit.
bool underscores_ok(std::string_view s) {
  char saw = '^';
  std::size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0' && (lower(s[1]) == 'b' || lower(s[1]) == 'o' || lower(s[1]) == 'x')) {
    i = 2;
    saw = '0';
    hex = lower(s[1]) == 'x';
  }
  for (; i < s.size(); ++i) {
    if ((s[i] >= '0' && s[i] <= '9') || (hex && hex_value(s[i]) >= 0)) {
      saw = '0';
      continue;
    }
    if (s[i] == '_') {
      if (saw != '0') return false;
      saw = '_';
      continue;
    }
    if (saw == '_') return false;
    saw = '!';
  }
  return saw != '_';
}

// strconv.ParseUint(s, 0, 64).
bool parse_uint(std::string_view s, std::uint64_t& out) {
  const std::string_view s0 = s;
  if (s.empty()) return false;
  unsigned base = 10;
  if (s[0] == '0') {
    if (s.size() >= 3 && lower(s[1]) == 'b') base = 2, s.remove_prefix(2);
    else if (s.size() >= 3 && lower(s[1]) == 'o') base = 8, s.remove_prefix(2);
    else if (s.size() >= 3 && lower(s[1]) == 'x') base = 16, s.remove_prefix(2);
    else base = 8, s.remove_prefix(1);
  }
  std::uint64_t n = 0;
  bool underscores = false;
  for (char c : s) {
    if (c == '_') {
      underscores = true;
      continue;
    }
    int d = hex_value(c);
    if (d < 0 || static_cast<unsigned>(d) >= base) return false;
    if (n > (UINT64_MAX - static_cast<unsigned>(d)) / base) return false;  // out of range
    n = n * base + static_cast<unsigned>(d);
  }
  if (underscores && !underscores_ok(s0)) return false;
  out = n;
  return true;
}

// strconv.ParseInt(s, 0, 64).
bool parse_int(std::string_view s, std::int64_t& out) {
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  std::uint64_t u = 0;
  if (!parse_uint(s, u)) return false;
  if (!neg && u > static_cast<std::uint64_t>(INT64_MAX)) return false;
  if (neg && u > static_cast<std::uint64_t>(INT64_MAX) + 1) return false;
  out = neg ? static_cast<std::int64_t>(0 - u) : static_cast<std::int64_t>(u);
  return true;
}

// strconv.ParseFloat(s, 64) for what the lexer lets through (no Inf or NaN words).
bool parse_float(std::string_view s, double& out) {
  bool neg = false;
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  const bool hex = body.size() > 2 && body[0] == '0' && lower(body[1]) == 'x';
  if (body.find('_') != std::string_view::npos && !underscores_ok(s)) return false;
  std::string digits;
  for (char c : hex ? body.substr(2) : body)
    if (c != '_') digits += c;
  if (hex && digits.find_first_of("pP") == std::string::npos) return false;  // a hex mantissa needs p
  if (!hex && digits.find_first_of("pPxX") != std::string::npos) return false;
  if (digits.empty() || digits == ".") return false;
  double v = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v,
                           hex ? std::chars_format::hex : std::chars_format::general);
  if (r.ptr != digits.data() + digits.size()) return false;
  if (r.ec == std::errc::result_out_of_range && std::abs(v) > 1) return false;  // overflow; underflow is 0
  out = neg ? -v : v;
  return true;
}

}  // namespace

char32_t decode_rune(std::string_view s, std::size_t& width) {
  width = 1;
  if (s.empty()) return 0xFFFD;
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return b0;
  int n = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (b0 > 0xF4) n = 0;
  if (n == 0 || s.size() < static_cast<std::size_t>(n)) return 0xFFFD;
  char32_t r = b0 & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    auto b = static_cast<unsigned char>(s[static_cast<std::size_t>(k)]);
    if ((b & 0xC0) != 0x80) return 0xFFFD;
    r = r << 6 | (b & 0x3F);
  }
  if ((n == 3 && (r < 0x800 || (r >= 0xD800 && r <= 0xDFFF))) || (n == 4 && (r < 0x10000 || r > 0x10FFFF)))
    return 0xFFFD;
  width = static_cast<std::size_t>(n);
  return r;
}

void append_rune(std::string& out, char32_t r) {
  if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) r = 0xFFFD;
  if (r < 0x80) {
    out += static_cast<char>(r);
  } else if (r < 0x800) {
    out += static_cast<char>(0xC0 | (r >> 6));
    out += static_cast<char>(0x80 | (r & 0x3F));
  } else if (r < 0x10000) {
    out += static_cast<char>(0xE0 | (r >> 12));
    out += static_cast<char>(0x80 | ((r >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (r & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (r >> 18));
    out += static_cast<char>(0x80 | ((r >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((r >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (r & 0x3F));
  }
}

bool is_print(char32_t r) {
  if (r < 0x20 || (r >= 0x7F && r <= 0xA0) || r == 0xAD) return false;
  if (r < 0x7F) return true;
  struct Range {
    char32_t lo, hi;
  };
  static constexpr Range kUnprintable[] = {
      {0x0600, 0x0605},   {0x061C, 0x061C},   {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},
      {0x08E2, 0x08E2},   {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
      {0x205F, 0x206F},   {0x3000, 0x3000},   {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},
      {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
      {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
  };
  for (const auto& range : kUnprintable)
    if (r >= range.lo && r <= range.hi) return false;
  return r <= 0x10FFFF;
}

bool unquote(std::string_view in, std::string& out) {
  out.clear();
  if (in.size() < 2 || in.front() != in.back()) return false;
  const char quote = in.front();
  std::string_view s = in.substr(1, in.size() - 2);
  if (quote == '`') {
    if (s.find('`') != std::string_view::npos) return false;
    for (char c : s)
      if (c != '\r') out += c;  // Go drops carriage returns from raw strings
    return true;
  }
  if (quote != '"' && quote != '\'') return false;
  while (!s.empty()) {
    if (s[0] == '\n') return false;
    char32_t r = 0;
    bool multibyte = false;
    if (!unquote_char(s, quote, r, multibyte)) return false;
    if (r < 0x80 || !multibyte) out += static_cast<char>(r);
    else append_rune(out, r);
    if (quote == '\'') break;
  }
  return s.empty() && (quote == '"' || !out.empty());
}

bool parse_number(std::string_view text, bool is_char, Number& n, std::string& error) {
  n = Number{};
  n.text = std::string(text);
  if (is_char) {
    std::string_view s = text.substr(1);
    char32_t r = 0;
    bool multibyte = false;
    if (!unquote_char(s, '\'', r, multibyte)) {
      error = "invalid syntax";
      return false;
    }
    if (s != "'") {
      error = "malformed character constant: " + n.text;
      return false;
    }
    n.is_int = n.is_uint = n.is_float = true;
    n.i = r;
    n.u = r;
    n.f = r;
    return true;
  }
  if (!text.empty() && text.back() == 'i') {
    error = "complex constants are not supported in request-log templates: " + n.text;
    return false;
  }
  n.is_uint = parse_uint(text, n.u);
  n.is_int = parse_int(text, n.i);
  if (n.is_int && n.i == 0) n.is_uint = true;  // -0
  if (n.is_int) {
    n.is_float = true;
    n.f = static_cast<double>(n.i);
  } else if (n.is_uint) {
    n.is_float = true;
    n.f = static_cast<double>(n.u);
  } else if (double f = 0; parse_float(text, f)) {
    if (text.find_first_of(".eEpP") == std::string_view::npos) {
      error = "integer overflow: \"" + n.text + "\"";
      return false;
    }
    n.is_float = true;
    n.f = f;
    if (f >= -9223372036854775808.0 && f < 9223372036854775808.0 && static_cast<double>(static_cast<std::int64_t>(f)) == f) {
      n.is_int = true;
      n.i = static_cast<std::int64_t>(f);
    }
    if (f >= 0 && f < 18446744073709551616.0 && static_cast<double>(static_cast<std::uint64_t>(f)) == f) {
      n.is_uint = true;
      n.u = static_cast<std::uint64_t>(f);
    }
  }
  if (!n.is_int && !n.is_uint && !n.is_float) {
    error = "illegal number syntax: \"" + n.text + "\"";
    return false;
  }
  return true;
}

}  // namespace sluice::gotemplate
