// Go's fmt printer; see printer.h. Pointers Go would print as addresses print as one made-up address:
// sluice has no Go heap to show.
#include "gotemplate/printer.h"

#include <array>
#include <string>
#include <utility>

#include "gotemplate/data.h"
#include "gotemplate/go_format.h"
#include "gotemplate/literal.h"

namespace sluice::gotemplate {
namespace {

constexpr std::string_view kAddress = "0xc000010000";
constexpr std::uint64_t kAddressValue = 0xc000010000;
constexpr const char* kLower = "0123456789abcdefx";
constexpr const char* kUpper = "0123456789ABCDEFX";

std::size_t rune_count(std::string_view s) {
  std::size_t n = 0;
  while (!s.empty()) {
    std::size_t w = 1;
    decode_rune(s, w);
    s.remove_prefix(w);
    ++n;
  }
  return n;
}

}  // namespace

void Printer::print_arg(const Value& v, char32_t verb) {
  if (v.type == Type::nil || v.type == Type::invalid) {
    if (verb == 'T' || verb == 'v') pad("<nil>");
    else bad_verb(v, verb);
    return;
  }
  if (verb == 'T') {
    pad(type_name(v));
    return;
  }
  switch (v.type) {
    case Type::boolean: fmt_bool(v, verb); return;
    case Type::integer: fmt_integer_verb(v, verb); return;
    case Type::floating: fmt_float_verb(v, verb); return;
    case Type::string: fmt_string(v, v.s, verb); return;
    default: print_value(v, verb, 0);
  }
}

void Printer::print_value(const Value& v, char32_t verb, int depth) {
  // A fmt.Stringer (*url.URL): its String() is printed, for the verbs that print strings.
  if (v.type == Type::pointer && !erroring_ && !f.sharp_v &&
      (verb == 'v' || verb == 's' || verb == 'x' || verb == 'X' || verb == 'q') && data_.is_stringer(v)) {
    std::string s;
    data_.append_string(v, s);
    fmt_string(v, s, verb);
    return;
  }
  switch (v.type) {
    case Type::invalid:
    case Type::nil:
      if (depth == 0) out_ += "<invalid reflect.Value>";
      else if (verb == 'v') out_ += "<nil>";
      else bad_verb(v, verb);
      return;
    case Type::boolean: fmt_bool(v, verb); return;
    case Type::integer: fmt_integer_verb(v, verb); return;
    case Type::floating: fmt_float_verb(v, verb); return;
    case Type::string: fmt_string(v, v.s, verb); return;
    case Type::strings: print_list(v, verb, depth); return;
    case Type::nil_map:
    case Type::map: print_map(v, verb, depth); return;
    case Type::nil_pointer: fmt_pointer(v, verb, true); return;
    default:
      if (depth == 0 && v.type == Type::pointer) {
        out_ += '&';
        print_struct(v, verb, depth + 1);
      } else {
        fmt_pointer(v, verb, false);
      }
  }
}

void Printer::print_struct(const Value& v, char32_t verb, int depth) {
  std::array<Data::Field, 24> fields;
  auto n = data_.fields(v, fields.data(), fields.size());
  if (f.sharp_v) out_ += type_name(v).substr(1);
  out_ += '{';
  for (std::size_t k = 0; k < n; ++k) {
    if (k) out_ += f.sharp_v ? ", " : " ";
    if (f.plus_v || f.sharp_v) {
      out_ += fields[k].name;
      out_ += ':';
    }
    print_value(fields[k].value, verb, depth + 1);
  }
  out_ += '}';
}

void Printer::print_list(const Value& v, char32_t verb, int depth) {
  if (f.sharp_v) {
    out_ += "[]string";
    if (!v.list) {
      out_ += "(nil)";
      return;
    }
    out_ += '{';
  } else {
    out_ += '[';
  }
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (k) out_ += f.sharp_v ? ", " : " ";
    print_value(Value::string(v.item(k)), verb, depth + 1);
  }
  out_ += f.sharp_v ? '}' : ']';
}

void Printer::print_map(const Value& v, char32_t verb, int depth) {
  const auto& m = data_.entries(v);
  if (f.sharp_v) {
    out_ += type_name(v);
    if (v.type == Type::nil_map) {
      out_ += "(nil)";
      return;
    }
    out_ += '{';
  } else {
    out_ += "map[";
  }
  for (std::size_t k = 0; k < m.entries.size(); ++k) {
    if (k) out_ += f.sharp_v ? ", " : " ";
    print_value(Value::string(m.entries[k].key), verb, depth + 1);
    out_ += ':';
    print_value(Value::strings(&m.items, m.entries[k].begin, m.entries[k].end), verb, depth + 1);
  }
  out_ += f.sharp_v ? '}' : ']';
}

void Printer::fmt_pointer(const Value& v, char32_t verb, bool nil) {
  switch (verb) {
    case 'v':
      if (f.sharp_v) {
        out_ += "(" + std::string(type_name(v)) + ")(";
        out_ += nil ? "nil" : kAddress;
        out_ += ')';
      } else if (nil) {
        pad("<nil>");
      } else {
        pad(f.sharp ? kAddress.substr(2) : kAddress);
      }
      return;
    case 'p': pad(nil ? "0x0" : kAddress); return;
    case 'b':
    case 'o':
    case 'd':
    case 'x':
    case 'X':
      fmt_integer(nil ? 0 : kAddressValue, verb == 'b' ? 2 : verb == 'o' ? 8 : verb == 'd' ? 10 : 16, false, verb,
                  verb == 'X' ? kUpper : kLower);
      return;
    default: bad_verb(v, verb);
  }
}

void Printer::bad_verb(const Value& v, char32_t verb) {
  erroring_ = true;
  out_ += "%!";
  append_rune(out_, verb);
  out_ += '(';
  if (v.type == Type::nil || v.type == Type::invalid) {
    out_ += "<nil>";
  } else {
    out_ += type_name(v);
    out_ += '=';
    print_arg(v, 'v');
  }
  out_ += ')';
  erroring_ = false;
}

void Printer::write_padding(std::size_t n) { out_.append(n, f.zero ? '0' : ' '); }

void Printer::pad(std::string_view s) {
  if (!f.wid_present || f.wid == 0) {
    out_ += s;
    return;
  }
  auto n = rune_count(s);
  auto padding = static_cast<std::size_t>(f.wid) > n ? static_cast<std::size_t>(f.wid) - n : 0;
  if (!f.minus) write_padding(padding);
  out_ += s;
  if (f.minus) write_padding(padding);
}

void Printer::fmt_bool(const Value& v, char32_t verb) {
  if (verb == 't' || verb == 'v') pad(v.b ? "true" : "false");
  else bad_verb(v, verb);
}

void Printer::fmt_integer_verb(const Value& v, char32_t verb) {
  const bool is_signed = v.s != "uint8";
  const auto u = static_cast<std::uint64_t>(v.i);
  switch (verb) {
    case 'v':
    case 'd': fmt_integer(u, 10, is_signed, verb, kLower); return;
    case 'b': fmt_integer(u, 2, is_signed, verb, kLower); return;
    case 'o':
    case 'O': fmt_integer(u, 8, is_signed, verb, kLower); return;
    case 'x': fmt_integer(u, 16, is_signed, verb, kLower); return;
    case 'X': fmt_integer(u, 16, is_signed, verb, kUpper); return;
    case 'c': {
      std::string s;
      append_rune(s, v.i < 0 || v.i > 0x10FFFF ? 0xFFFD : static_cast<char32_t>(v.i));
      pad(s);
      return;
    }
    case 'q': {
      std::string s;
      quote_rune(s, v.i < 0 || v.i > 0x10FFFF ? 0xFFFD : static_cast<char32_t>(v.i), f.plus);
      pad(s);
      return;
    }
    case 'U': fmt_unicode(u); return;
    default: bad_verb(v, verb);
  }
}

void Printer::fmt_integer(std::uint64_t u, int base, bool is_signed, char32_t verb, const char* digits) {
  const bool negative = is_signed && static_cast<std::int64_t>(u) < 0;
  if (negative) u = 0 - u;
  int prec = 0;
  if (f.prec_present) {
    prec = f.prec;
    if (prec == 0 && u == 0) {  // "print nothing" but the padding
      const bool zero = std::exchange(f.zero, false);
      write_padding(f.wid_present ? static_cast<std::size_t>(f.wid) : 0);
      f.zero = zero;
      return;
    }
  } else if (f.zero && !f.minus && f.wid_present) {
    prec = f.wid - (negative || f.plus || f.space ? 1 : 0);
  }
  char digs[72];
  std::size_t i = sizeof digs;
  const auto b = static_cast<std::uint64_t>(base);
  do {
    digs[--i] = digits[u % b];
    u /= b;
  } while (u);
  const std::string_view d(digs + i, sizeof digs - i);
  const std::size_t zeros = prec > static_cast<int>(d.size()) ? static_cast<std::size_t>(prec) - d.size() : 0;
  std::string s;  // sign, prefixes, zeros, digits
  if (negative) s += '-';
  else if (f.plus) s += '+';
  else if (f.space) s += ' ';
  if (verb == 'O') s += "0o";
  if (f.sharp && base == 2) s += "0b";
  if (f.sharp && base == 8 && zeros == 0 && d[0] != '0') s += '0';
  if (f.sharp && base == 16) s += std::string{'0', digits[16]};
  s.append(zeros, '0');
  s += d;
  const bool zero = std::exchange(f.zero, false);  // zeros were added above as precision
  pad(s);
  f.zero = zero;
}

void Printer::fmt_unicode(std::uint64_t u) {
  std::string hex;
  for (std::uint64_t x = u; x || hex.empty(); x >>= 4) hex.insert(hex.begin(), kUpper[x & 15]);
  int prec = f.prec_present && f.prec > 4 ? f.prec : 4;
  std::string s = "U+";
  if (static_cast<int>(hex.size()) < prec) s.append(static_cast<std::size_t>(prec) - hex.size(), '0');
  s += hex;
  if (f.sharp && u <= 0x10FFFF && is_print(static_cast<char32_t>(u))) {
    s += " '";
    append_rune(s, static_cast<char32_t>(u));
    s += '\'';
  }
  const bool zero = std::exchange(f.zero, false);
  pad(s);
  f.zero = zero;
}

void Printer::fmt_float_verb(const Value& v, char32_t verb) {
  switch (verb) {
    case 'v': fmt_float(v.f, 'g', -1); return;
    case 'g':
    case 'G':
    case 'x':
    case 'X': fmt_float(v.f, static_cast<char>(verb), -1); return;
    case 'e':
    case 'E':
    case 'f': fmt_float(v.f, static_cast<char>(verb), 6); return;
    case 'F': fmt_float(v.f, 'f', 6); return;
    default: bad_verb(v, verb);
  }
}

void Printer::fmt_float(double d, char verb, int prec) {
  if (f.prec_present) prec = f.prec;
  std::string num = "+";
  append_float(num, d, verb, prec);
  if (num[1] == '-' || num[1] == '+') num.erase(0, 1);
  if (f.space && num[0] == '+' && !f.plus) num[0] = ' ';
  if (num[1] == 'I' || num[1] == 'N') {  // no zero padding for infinities and NaN
    const bool zero = std::exchange(f.zero, false);
    if (num[1] == 'N' && !f.space && !f.plus) num.erase(0, 1);
    pad(num);
    f.zero = zero;
    return;
  }
  if (f.plus || num[0] != '+') {
    if (f.zero && !f.minus && f.wid_present && f.wid > static_cast<int>(num.size())) {
      out_ += num[0];  // the sign before the zeros
      write_padding(static_cast<std::size_t>(f.wid) - num.size());
      out_.append(num, 1);
      return;
    }
    pad(num);
    return;
  }
  pad(std::string_view(num).substr(1));
}

void Printer::fmt_string(const Value& v, std::string_view s, char32_t verb) {
  switch (verb) {
    case 'v':
      if (f.sharp_v) fmt_q(s);
      else pad(truncate(s));
      return;
    case 's': pad(truncate(s)); return;
    case 'x': fmt_sx(s, kLower); return;
    case 'X': fmt_sx(s, kUpper); return;
    case 'q': fmt_q(s); return;
    default: bad_verb(v, verb);
  }
}

std::string_view Printer::truncate(std::string_view s) const {
  if (!f.prec_present) return s;
  std::size_t at = 0;
  for (int n = f.prec; n > 0 && at < s.size(); --n) {
    std::size_t w = 1;
    decode_rune(s.substr(at), w);
    at += w;
  }
  return s.substr(0, at);
}

void Printer::fmt_q(std::string_view s) {
  s = truncate(s);
  std::string q;
  bool backquote = f.sharp && s.find('`') == std::string_view::npos;
  for (std::size_t k = 0; backquote && k < s.size();) {
    std::size_t w = 1;
    char32_t r = decode_rune(s.substr(k), w);
    if ((w == 1 && r == 0xFFFD) || r == 0xFEFF || (r < ' ' && r != '\t') || r == 0x7f) backquote = false;
    k += w;
  }
  if (backquote) q = "`" + std::string(s) + "`";
  else quote(q, s, f.plus);
  pad(q);
}

void Printer::fmt_sx(std::string_view s, const char* digits) {
  std::size_t length = f.prec_present && static_cast<std::size_t>(f.prec) < s.size() ? static_cast<std::size_t>(f.prec)
                                                                                       : s.size();
  std::string hex;
  if (length > 0 && f.sharp && !f.space) hex += std::string{'0', digits[16]};
  for (std::size_t k = 0; k < length; ++k) {
    if (f.space && k > 0) hex += ' ';
    if (f.space && f.sharp) hex += std::string{'0', digits[16]};
    auto c = static_cast<unsigned char>(s[k]);
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  const bool zero = std::exchange(f.zero, false);
  pad(hex);
  f.zero = zero;
}

std::string_view type_name(const Value& v) {
  switch (v.type) {
    case Type::invalid:
    case Type::nil: return "<nil>";
    case Type::boolean: return "bool";
    case Type::integer: return v.s.empty() ? "int" : v.s;
    case Type::floating: return "float64";
    case Type::string: return "string";
    case Type::strings: return "[]string";
    case Type::nil_map:
    case Type::map:
    case Type::pointer:
    case Type::nil_pointer: return v.s;
  }
  return "?";
}

}  // namespace sluice::gotemplate
