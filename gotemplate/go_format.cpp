// Go's value spellings and escapes; see go_format.h. Digits come from std::to_chars (shortest round trip, or
// correctly rounded to a precision), laid out as strconv's formatDigits lays them out.
#include "gotemplate/go_format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gotemplate/literal.h"

namespace sluice::gotemplate {
namespace {

constexpr const char* kUpperHex = "0123456789ABCDEF";
constexpr const char* kLowerHex = "0123456789abcdef";

// A decimal d[0..nd) × 10^(dp-nd), as strconv's decimalSlice; zero has nd = dp = 0.
struct Digits {
  std::string_view d;
  int dp = 0;
  bool neg = false;
  int nd() const { return static_cast<int>(d.size()); }
};

// `significant` < 0: the shortest digits; else that many, correctly rounded, trailing zeros dropped.
Digits digits_of(double v, int significant, std::string& buf) {
  Digits g;
  g.neg = std::signbit(v);
  if (v == 0) return g;
  buf.resize(static_cast<std::size_t>(std::max(significant, 0)) + 40);
  auto r = significant < 0 ? std::to_chars(buf.data(), buf.data() + buf.size(), std::abs(v), std::chars_format::scientific)
                           : std::to_chars(buf.data(), buf.data() + buf.size(), std::abs(v),
                                           std::chars_format::scientific, significant - 1);
  std::string_view s(buf.data(), static_cast<std::size_t>(r.ptr - buf.data()));
  auto e = s.find('e');
  auto exp_text = s.substr(e + 1);  // "+06", "-05"
  const bool exp_neg = exp_text[0] == '-';
  int exp = 0;
  std::from_chars(exp_text.data() + 1, exp_text.data() + exp_text.size(), exp);
  g.dp = (exp_neg ? -exp : exp) + 1;
  std::size_t n = 0;  // the digits, without the point, moved to the front of buf
  for (std::size_t k = 0; k < e; ++k)
    if (s[k] != '.') buf[n++] = s[k];
  while (n > 0 && buf[n - 1] == '0') --n;
  g.d = std::string_view(buf.data(), n);
  return g;
}

void fmt_e(std::string& out, const Digits& g, int prec, char e) {
  if (g.neg) out += '-';
  out += g.nd() ? g.d[0] : '0';
  if (prec > 0) {
    out += '.';
    int i = 1;
    for (int m = std::min(g.nd(), prec + 1); i < m; ++i) out += g.d[static_cast<std::size_t>(i)];
    for (; i <= prec; ++i) out += '0';
  }
  out += e;
  int exp = g.nd() == 0 ? 0 : g.dp - 1;
  out += exp < 0 ? '-' : '+';
  exp = std::abs(exp);
  if (exp >= 100) out += static_cast<char>('0' + exp / 100);
  out += static_cast<char>('0' + exp / 10 % 10);
  out += static_cast<char>('0' + exp % 10);
}

void fmt_f(std::string& out, const Digits& g, int prec) {
  if (g.neg) out += '-';
  if (g.dp > 0) {
    int m = std::min(g.nd(), g.dp);
    out.append(g.d.substr(0, static_cast<std::size_t>(m)));
    out.append(static_cast<std::size_t>(g.dp - m), '0');
  } else {
    out += '0';
  }
  if (prec > 0) {
    out += '.';
    for (int i = 0; i < prec; ++i) {
      int j = g.dp + i;
      out += j >= 0 && j < g.nd() ? g.d[static_cast<std::size_t>(j)] : '0';
    }
  }
}

// strconv's 'g': %e for exponents below -4 or from the precision (6 for the shortest digits) up.
void fmt_g(std::string& out, const Digits& g, int prec, bool shortest, char e) {
  int eprec = prec;
  if (eprec > g.nd() && g.nd() >= g.dp) eprec = g.nd();
  if (shortest) eprec = 6;
  const int exp = g.dp - 1;
  if (exp < -4 || exp >= eprec) {
    fmt_e(out, g, std::min(prec, g.nd()) - 1, e);
    return;
  }
  if (prec > g.dp) prec = g.nd();
  fmt_f(out, g, std::max(prec - g.dp, 0));
}

void escaped_rune(std::string& out, char32_t r, char q, bool ascii_only) {
  if (r == static_cast<char32_t>(q) || r == '\\') {
    out += '\\';
    out += static_cast<char>(r);
    return;
  }
  if (ascii_only ? (r < 0x80 && is_print(r)) : is_print(r)) {
    append_rune(out, r);
    return;
  }
  switch (r) {
    case '\a': out += "\\a"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\v': out += "\\v"; return;
    default: break;
  }
  int digits = 8;
  if (r < ' ' || r == 0x7f) {
    out += "\\x";
    digits = 2;
  } else if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) {
    r = 0xFFFD;
    out += "\\u";
    digits = 4;
  } else if (r < 0x10000) {
    out += "\\u";
    digits = 4;
  } else {
    out += "\\U";
  }
  for (int k = digits - 1; k >= 0; --k) out += kLowerHex[(r >> (4 * k)) & 15];
}

bool is_token(std::string_view name) {
  for (unsigned char c : name)
    if (!std::isalnum(c) && std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
      return false;
  return true;
}

}  // namespace

bool is_canonical(std::string_view name) {
  if (!is_token(name)) return true;
  bool upper = true;
  for (char c : name) {
    if (upper ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z')) return false;
    upper = c == '-';
  }
  return true;
}

std::string_view canonical_view(std::string_view name, std::string& buf) {
  if (is_canonical(name)) return name;
  buf.assign(name);
  bool upper = true;
  for (auto& c : buf) {
    c = upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
              : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    upper = c == '-';
  }
  return buf;
}

void append_go_float(std::string& out, double d) { append_float(out, d, 'g', -1); }

void append_float(std::string& out, double d, char fmt, int prec) {
  if (std::isnan(d)) {
    out += "NaN";
    return;
  }
  if (std::isinf(d)) {
    out += d > 0 ? "+Inf" : "-Inf";
    return;
  }
  thread_local std::string buf;
  if (fmt == 'x' || fmt == 'X') {  // -0x1.8p+01: a hex fraction and a binary exponent of two digits or more
    buf.resize(static_cast<std::size_t>(std::max(prec, 0)) + 40);
    auto r = prec < 0 ? std::to_chars(buf.data(), buf.data() + buf.size(), std::abs(d), std::chars_format::hex)
                      : std::to_chars(buf.data(), buf.data() + buf.size(), std::abs(d), std::chars_format::hex, prec);
    std::string_view h(buf.data(), static_cast<std::size_t>(r.ptr - buf.data()));
    auto p = h.find('p');
    if (std::signbit(d)) out += '-';
    out += fmt == 'x' ? "0x" : "0X";
    for (char c : h.substr(0, p)) out += fmt == 'x' ? c : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out += fmt == 'x' ? 'p' : 'P';
    out += h[p + 1];
    if (h.size() - p - 2 < 2) out += '0';
    out.append(h.substr(p + 2));
    return;
  }
  if (fmt == 'f') {
    if (prec < 0) {
      Digits g = digits_of(d, -1, buf);
      fmt_f(out, g, std::max(g.nd() - g.dp, 0));
      return;
    }
    buf.resize(static_cast<std::size_t>(prec) + 330);
    auto r = std::to_chars(buf.data(), buf.data() + buf.size(), d, std::chars_format::fixed, prec);
    out.append(buf.data(), r.ptr);
    return;
  }
  const bool shortest = prec < 0;
  if (fmt == 'e' || fmt == 'E') {
    Digits g = digits_of(d, shortest ? -1 : prec + 1, buf);
    fmt_e(out, g, shortest ? std::max(g.nd() - 1, 0) : prec, fmt);
    return;
  }
  if (!shortest && prec == 0) prec = 1;
  Digits g = digits_of(d, shortest ? -1 : prec, buf);
  fmt_g(out, g, shortest ? g.nd() : prec, shortest, fmt == 'G' ? 'E' : 'e');
}

void quote(std::string& out, std::string_view s, bool ascii_only) {
  out += '"';
  while (!s.empty()) {
    std::size_t width = 1;
    char32_t r = decode_rune(s, width);
    if (width == 1 && r == 0xFFFD) {
      auto c = static_cast<unsigned char>(s[0]);
      out += "\\x";
      out += kLowerHex[c >> 4];
      out += kLowerHex[c & 15];
    } else {
      escaped_rune(out, r, '"', ascii_only);
    }
    s.remove_prefix(width);
  }
  out += '"';
}

void quote_rune(std::string& out, char32_t r, bool ascii_only) {
  if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) r = 0xFFFD;
  out += '\'';
  escaped_rune(out, r, '\'', ascii_only);
  out += '\'';
}

void js_escape(std::string& out, std::string_view s) {
  while (!s.empty()) {
    auto c = static_cast<unsigned char>(s[0]);
    std::size_t width = 1;
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += "\\\""; break;
      case '<': out += "\\u003C"; break;
      case '>': out += "\\u003E"; break;
      case '&': out += "\\u0026"; break;
      case '=': out += "\\u003D"; break;
      default:
        if (c < ' ') {
          out += "\\u00";
          out += kUpperHex[c >> 4];
          out += kUpperHex[c & 15];
        } else if (c < 0x80) {
          out += static_cast<char>(c);
        } else {  // printable characters pass; others as \uXXXX (an invalid byte passes as it is)
          char32_t r = decode_rune(s, width);
          if (is_print(r)) {
            out.append(s.substr(0, width));
          } else {
            char hex[16];
            auto n = std::snprintf(hex, sizeof hex, "\\u%04X", static_cast<unsigned>(r));
            out.append(hex, static_cast<std::size_t>(n));
          }
        }
    }
    s.remove_prefix(width);
  }
}

void html_escape(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\0': out += "\xEF\xBF\xBD"; break;
      default: out += c;
    }
  }
}

void query_escape(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kUpperHex[c >> 4];
      out += kUpperHex[c & 15];
    }
  }
}

}  // namespace sluice::gotemplate
