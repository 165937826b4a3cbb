// Go's fmt entry points over template values (Sprint, Sprintln, Sprintf's format walk); see fmt.h. One
// value under one verb is printer.h's Printer.
#include "gotemplate/fmt.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "gotemplate/data.h"
#include "gotemplate/go_format.h"
#include "gotemplate/literal.h"
#include "gotemplate/printer.h"

namespace sluice::gotemplate {
namespace {

bool is_go_string(const Value& v) { return v.type == Type::string; }

// parsenum: a decimal number at s[i..]; -1 when none (or too large, as Go's tooLarge).
int parse_number_at(std::string_view s, std::size_t& i) {
  if (i >= s.size() || s[i] < '0' || s[i] > '9') return -1;
  int n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (n > 1000000) return -1;
    n = n * 10 + (s[i++] - '0');
  }
  return n > 1000000 ? -1 : n;
}

}  // namespace

void print_action_value(std::string& out, const Value& v, Data& data) {
  Printer p(out, data);
  switch (v.type) {
    case Type::invalid: out += "<no value>"; return;
    case Type::string: out += v.s; return;
    case Type::integer:
      if (v.s != "uint8") {
        char digits[24];
        auto r = std::to_chars(digits, digits + sizeof digits, v.i);
        out.append(digits, r.ptr);
        return;
      }
      break;
    case Type::floating: append_go_float(out, v.f); return;
    case Type::pointer:  // printValue dereferences a pointer, unless it is a Stringer
      if (!data.is_stringer(v)) {
        p.print_struct(v, 'v', 0);
        return;
      }
      break;
    default: break;
  }
  p.print_arg(v, 'v');
}

void sprint_printable(std::string& out, const Value* args, std::size_t n, Data& data) {
  // text/template's evalArgs: each argument as printValue has it (no value is "<no value>", a pointer to a
  // struct is the struct), then fmt.Sprint.
  Printer p(out, data);
  auto printable_string = [](const Value& v) { return v.type == Type::string || v.type == Type::nil || v.type == Type::invalid; };
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0 && !printable_string(args[k]) && !printable_string(args[k - 1])) out += ' ';
    const Value& v = args[k];
    if (v.type == Type::nil || v.type == Type::invalid) out += "<no value>";
    else if (v.type == Type::pointer && !data.is_stringer(v)) p.print_struct(v, 'v', 0);
    else p.print_arg(v, 'v');
  }
}

void sprint(std::string& out, const Value* args, std::size_t n, Data& data) {
  Printer p(out, data);
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0 && !is_go_string(args[k]) && !is_go_string(args[k - 1])) out += ' ';
    p.print_arg(args[k], 'v');
  }
}

void sprintln(std::string& out, const Value* args, std::size_t n, Data& data) {
  Printer p(out, data);
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0) out += ' ';
    p.print_arg(args[k], 'v');
  }
  out += '\n';
}

void sprintf(std::string& out, std::string_view format, const Value* args, std::size_t n, Data& data) {
  Printer p(out, data);
  std::size_t arg = 0;
  bool reordered = false;
  // An explicit argument index, "[n]", at format[i]; false in `good` when it names no argument.
  auto arg_number = [&](std::size_t& i, bool& good) {
    if (i >= format.size() || format[i] != '[') return false;
    reordered = true;
    auto close = format.find(']', i);
    if (close == std::string_view::npos || format.size() - i < 3) {
      ++i;
      good = false;
      return false;
    }
    std::size_t j = i + 1;
    int index = parse_number_at(format, j);
    i = close + 1;
    if (index < 1 || j != close || static_cast<std::size_t>(index) > n) {
      good = false;
      return index >= 0 && j == close;
    }
    arg = static_cast<std::size_t>(index - 1);
    return true;
  };
  auto int_from_arg = [&](int& out_n) {
    if (arg >= n) return false;
    const Value& a = args[arg++];
    if (a.type != Type::integer || a.i > 1000000 || a.i < -1000000) return false;
    out_n = static_cast<int>(a.i);
    return true;
  };
  for (std::size_t i = 0; i < format.size();) {
    auto pct = format.find('%', i);
    out.append(format.substr(i, pct == std::string_view::npos ? std::string_view::npos : pct - i));
    if (pct == std::string_view::npos) break;
    i = pct + 1;
    p.f = Flags{};
    for (; i < format.size(); ++i) {
      char c = format[i];
      if (c == '#') p.f.sharp = true;
      else if (c == '0') p.f.zero = !p.f.minus;
      else if (c == '+') p.f.plus = true;
      else if (c == '-') p.f.minus = true, p.f.zero = false;
      else if (c == ' ') p.f.space = true;
      else break;
    }
    bool good = true;
    bool after_index = arg_number(i, good);
    if (i < format.size() && format[i] == '*') {
      ++i;
      p.f.wid_present = int_from_arg(p.f.wid);
      if (!p.f.wid_present) out += "%!(BADWIDTH)";
      if (p.f.wid < 0) p.f.wid = -p.f.wid, p.f.minus = true, p.f.zero = false;
      after_index = false;
    } else {
      int w = parse_number_at(format, i);
      p.f.wid_present = w >= 0;
      p.f.wid = std::max(w, 0);
      if (after_index && p.f.wid_present) good = false;
    }
    if (i + 1 < format.size() && format[i] == '.') {
      ++i;
      if (after_index) good = false;
      after_index = arg_number(i, good);
      if (i < format.size() && format[i] == '*') {
        ++i;
        p.f.prec_present = int_from_arg(p.f.prec);
        if (p.f.prec < 0) p.f.prec = 0, p.f.prec_present = false;
        if (!p.f.prec_present) out += "%!(BADPREC)";
        after_index = false;
      } else {
        int pr = parse_number_at(format, i);
        p.f.prec = std::max(pr, 0);
        p.f.prec_present = true;
      }
    }
    if (!after_index) after_index = arg_number(i, good);
    if (i >= format.size()) {
      out += "%!(NOVERB)";
      break;
    }
    std::size_t w = 1;
    char32_t verb = decode_rune(format.substr(i), w);
    i += w;
    if (verb == '%') {
      out += '%';
    } else if (!good) {
      out += "%!";
      append_rune(out, verb);
      out += "(BADINDEX)";
    } else if (arg >= n) {
      out += "%!";
      append_rune(out, verb);
      out += "(MISSING)";
    } else {
      if (verb == 'v') {
        p.f.sharp_v = std::exchange(p.f.sharp, false);
        p.f.plus_v = std::exchange(p.f.plus, false);
      }
      p.print_arg(args[arg++], verb);
    }
  }
  if (!reordered && arg < n) {
    p.f = Flags{};
    out += "%!(EXTRA ";
    for (std::size_t k = arg; k < n; ++k) {
      if (k > arg) out += ", ";
      if (args[k].type == Type::nil || args[k].type == Type::invalid) {
        out += "<nil>";
      } else {
        out += type_name(args[k]);
        out += '=';
        p.print_arg(args[k], 'v');
      }
    }
    out += ')';
  }
}

}  // namespace sluice::gotemplate
