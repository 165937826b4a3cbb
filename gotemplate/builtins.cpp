// text/template's builtins (funcs.go, read for its behaviour): comparisons only between basic kinds (an int
// and a uint compare, an int and a float do not), index and slice over strings, slices and maps, and the
// printing functions through fmt.
#include "gotemplate/builtins.h"

#include "gotemplate/data.h"
#include "gotemplate/fmt.h"
#include "gotemplate/go_format.h"

namespace sluice::gotemplate {
namespace {

using P = ParamKind;
constexpr BuiltinSig kSigs[] = {
    {"and", 1, true, P::reflect, P::reflect},     {"or", 1, true, P::reflect, P::reflect},
    {"not", 1, false, P::reflect, P::reflect},    {"len", 1, false, P::reflect, P::reflect},
    {"index", 1, true, P::reflect, P::reflect},   {"slice", 1, true, P::reflect, P::reflect},
    {"print", 0, true, P::any, P::any},           {"printf", 1, true, P::string, P::any},
    {"println", 0, true, P::any, P::any},         {"html", 0, true, P::any, P::any},
    {"js", 0, true, P::any, P::any},              {"urlquery", 0, true, P::any, P::any},
    {"eq", 1, true, P::reflect, P::reflect},      {"ne", 2, false, P::reflect, P::reflect},
    {"lt", 2, false, P::reflect, P::reflect},     {"le", 2, false, P::reflect, P::reflect},
    {"gt", 2, false, P::reflect, P::reflect},     {"ge", 2, false, P::reflect, P::reflect},
    {"call", 1, true, P::reflect, P::reflect},
};

enum class Kind { invalid, boolean, integer, unsigned_, floating, string };  // funcs.go's basicKind

Kind kind_of(const Value& v) {
  switch (v.type) {
    case Type::boolean: return Kind::boolean;
    case Type::integer: return v.s == "uint8" ? Kind::unsigned_ : Kind::integer;
    case Type::floating: return Kind::floating;
    case Type::string: return Kind::string;
    default: return Kind::invalid;
  }
}

bool is_nil(const Value& v) {
  return v.type == Type::invalid || v.type == Type::nil || v.type == Type::nil_map || v.type == Type::nil_pointer ||
         (v.type == Type::strings && !v.list);
}

bool equal(const Value& a, const Value& b) {
  const Kind ka = kind_of(a), kb = kind_of(b);
  if (ka != kb) {
    if (ka == Kind::integer && kb == Kind::unsigned_) return a.i >= 0 && a.i == b.i;
    if (ka == Kind::unsigned_ && kb == Kind::integer) return b.i >= 0 && a.i == b.i;
    if (a.type != Type::invalid && b.type != Type::invalid) fail("incompatible types for comparison");
    return false;
  }
  switch (ka) {
    case Kind::boolean: return a.b == b.b;
    case Kind::integer:
    case Kind::unsigned_: return a.i == b.i;
    case Kind::floating: return a.f == b.f;
    case Kind::string: return a.s == b.s;
    case Kind::invalid: break;
  }
  // Neither is of a basic kind: nil compares with anything nillable; maps and slices not otherwise.
  if (is_nil(a) || is_nil(b)) return is_nil(a) == is_nil(b);
  if (is_map(a) || is_map(b) || a.type == Type::strings || b.type == Type::strings)
    fail("non-comparable type " + std::string(type_name(a)));
  return a.kind == b.kind && a.i == b.i;  // pointers of the data's: the same one
}

bool less(const Value& a, const Value& b) {
  const Kind ka = kind_of(a), kb = kind_of(b);
  if (ka == Kind::invalid || kb == Kind::invalid) fail("invalid type for comparison");
  if (ka != kb) {
    if (ka == Kind::integer && kb == Kind::unsigned_) return a.i < 0 || a.i < b.i;
    if (ka == Kind::unsigned_ && kb == Kind::integer) return b.i >= 0 && a.i < b.i;
    fail("incompatible types for comparison");
  }
  switch (ka) {
    case Kind::integer:
    case Kind::unsigned_: return a.i < b.i;
    case Kind::floating: return a.f < b.f;
    case Kind::string: return a.s < b.s;
    default: fail("invalid type for comparison");
  }
}

// indexArg: an int index into something of length `cap`.
std::size_t index_arg(const Value& index, std::size_t cap) {
  if (index.type == Type::invalid || index.type == Type::nil) fail("cannot index slice/array with nil");
  if (index.type != Type::integer) fail("cannot index slice/array with type " + std::string(type_name(index)));
  if (index.i < 0 || static_cast<std::uint64_t>(index.i) > cap) fail("index out of range: " + std::to_string(index.i));
  return static_cast<std::size_t>(index.i);
}

Value index(const Value* args, std::size_t n, Data& data) {
  Value item = args[0];
  if (item.type == Type::invalid || item.type == Type::nil) fail("index of untyped nil");
  for (std::size_t k = 1; k < n; ++k) {
    const Value& key = args[k];
    switch (item.type) {
      case Type::string: {
        auto x = index_arg(key, item.s.size());
        if (x == item.s.size()) fail("index out of range: " + std::to_string(x));
        item = Value{.type = Type::integer, .i = static_cast<unsigned char>(item.s[x]), .s = "uint8"};
        break;
      }
      case Type::strings: {
        auto x = index_arg(key, item.size());
        if (x == item.size()) fail("index out of range: " + std::to_string(x));
        item = Value::string(item.item(x));
        break;
      }
      case Type::map:
      case Type::nil_map: {
        if (key.type == Type::invalid || key.type == Type::nil) fail("value is nil; should be of type string");
        if (key.type != Type::string)
          fail("value has type " + std::string(type_name(key)) + "; should be string");
        Value v = data.key(item, key.s);
        item = v.type == Type::invalid ? Value::strings(nullptr, 0, 0) : v;  // a missing key: the zero []string
        break;
      }
      case Type::nil_pointer: fail("index of nil pointer");
      default: fail("can't index item of type " + std::string(type_name(item)));
    }
  }
  return item;
}

Value slice(const Value* args, std::size_t n) {
  const Value& item = args[0];
  if (item.type == Type::invalid || item.type == Type::nil) fail("slice of untyped nil");
  if (n > 4) fail("too many slice indexes: " + std::to_string(n - 1));
  std::size_t len = 0;
  if (item.type == Type::string) {
    if (n == 4) fail("cannot 3-index slice a string");
    len = item.s.size();
  } else if (item.type == Type::strings) {
    len = item.size();
  } else {
    fail("can't slice item of type " + std::string(type_name(item)));
  }
  std::size_t idx[3] = {0, len, len};
  for (std::size_t k = 1; k < n; ++k) idx[k - 1] = index_arg(args[k], len);
  if (idx[0] > idx[1]) fail("invalid slice index: " + std::to_string(idx[0]) + " > " + std::to_string(idx[1]));
  if (n == 4 && idx[1] > idx[2])
    fail("invalid slice index: " + std::to_string(idx[1]) + " > " + std::to_string(idx[2]));
  if (item.type == Type::string) return Value::string(item.s.substr(idx[0], idx[1] - idx[0]));
  return Value::strings(item.list, item.begin + idx[0], item.begin + idx[1]);
}

std::size_t length(const Value& v, Data& data) {
  switch (v.type) {
    case Type::string: return v.s.size();
    case Type::strings: return v.size();
    case Type::map:
    case Type::nil_map: return data.entries(v).entries.size();
    case Type::nil_pointer: fail("len of nil pointer");
    default: fail("len of type " + std::string(type_name(v)));
  }
}

}  // namespace

const BuiltinSig& signature(Builtin b) { return kSigs[static_cast<std::size_t>(b)]; }

bool truth(const Value& v, Data& data) {
  switch (v.type) {
    case Type::invalid:
    case Type::nil:
    case Type::nil_map:
    case Type::nil_pointer: return false;
    case Type::boolean: return v.b;
    case Type::integer: return v.i != 0;
    case Type::floating: return v.f != 0;
    case Type::string: return !v.s.empty();
    case Type::strings: return v.size() > 0;
    case Type::map: return !data.entries(v).entries.empty();
    default: return true;  // a non-nil pointer
  }
}

Value call_builtin(Builtin b, const Value* args, std::size_t n, Data& data) {
  auto text = [&](void (*escape)(std::string&, std::string_view)) {
    auto& s = data.scratch().string();
    if (n == 1 && args[0].type == Type::string) {
      escape(s, args[0].s);
    } else {
      auto& joined = data.scratch().string();
      sprint_printable(joined, args, n, data);
      escape(s, joined);
    }
    return Value::string(s);
  };
  switch (b) {
    case Builtin::not_: return Value::boolean(!truth(args[0], data));
    case Builtin::len: return Value::integer(static_cast<std::int64_t>(length(args[0], data)));
    case Builtin::index: return index(args, n, data);
    case Builtin::slice: return slice(args, n);
    case Builtin::print:
    case Builtin::println:
    case Builtin::printf: {
      auto& s = data.scratch().string();
      if (b == Builtin::print) sprint(s, args, n, data);
      else if (b == Builtin::println) sprintln(s, args, n, data);
      else sprintf(s, args[0].s, args + 1, n - 1, data);
      return Value::string(s);
    }
    case Builtin::html: return text(html_escape);
    case Builtin::js: return text(js_escape);
    case Builtin::urlquery: return text(query_escape);
    case Builtin::eq: {
      if (n < 2) fail("missing argument for comparison");
      for (std::size_t k = 1; k < n; ++k)
        if (equal(args[0], args[k])) return Value::boolean(true);
      return Value::boolean(false);
    }
    case Builtin::ne: return Value::boolean(!equal(args[0], args[1]));
    case Builtin::lt: return Value::boolean(less(args[0], args[1]));
    case Builtin::le: return Value::boolean(less(args[0], args[1]) || equal(args[0], args[1]));
    case Builtin::gt: return Value::boolean(!(less(args[0], args[1]) || equal(args[0], args[1])));
    case Builtin::ge: return Value::boolean(!less(args[0], args[1]));
    case Builtin::call:
      if (args[0].type == Type::invalid || args[0].type == Type::nil) fail("call of nil");
      fail("non-function of type " + std::string(type_name(args[0])));
    case Builtin::and_:
    case Builtin::or_: break;
  }
  fail("unexpected function");
}

}  // namespace sluice::gotemplate
