// Go's fmt printer (fmt/print.go and format.go, read for their behaviour) over template values: one value
// under one verb with its flags, width and precision (internal to gotemplate/; fmt.h is its use).
#pragma once

#include <string>
#include <string_view>

#include "gotemplate/value.h"

namespace sluice::gotemplate {

class Data;

struct Flags {
  bool plus = false, minus = false, sharp = false, space = false, zero = false, plus_v = false, sharp_v = false;
  bool wid_present = false, prec_present = false;
  int wid = 0, prec = 0;
};

class Printer {
 public:
  Printer(std::string& out, Data& data) : out_(out), data_(data) {}

  Flags f;
  void print_arg(const Value& v, char32_t verb);    // fmt's printArg: a value at the top
  void print_value(const Value& v, char32_t verb, int depth);  // printValue: within a value too

  // A struct reached through its pointer (or dereferenced by the template's printValue).
  void print_struct(const Value& v, char32_t verb, int depth);

 private:
  void print_list(const Value& v, char32_t verb, int depth);
  void print_map(const Value& v, char32_t verb, int depth);
  void fmt_pointer(const Value& v, char32_t verb, bool nil);
  void bad_verb(const Value& v, char32_t verb);
  void write_padding(std::size_t n);
  void pad(std::string_view s);
  void fmt_bool(const Value& v, char32_t verb);
  void fmt_integer_verb(const Value& v, char32_t verb);
  void fmt_integer(std::uint64_t u, int base, bool is_signed, char32_t verb, const char* digits);
  void fmt_unicode(std::uint64_t u);
  void fmt_float_verb(const Value& v, char32_t verb);
  void fmt_float(double d, char verb, int prec);
  void fmt_string(const Value& v, std::string_view s, char32_t verb);
  std::string_view truncate(std::string_view s) const;
  void fmt_q(std::string_view s);
  void fmt_sx(std::string_view s, const char* digits);

  std::string& out_;
  Data& data_;
  bool erroring_ = false;
};

}  // namespace sluice::gotemplate
