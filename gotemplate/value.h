// The values a template computes with: Go's types as far as a template reaches them, held as views into the
// data and the template (no copies), and the per-thread scratch space for the few values a template or its
// data makes (printed strings, string lists, maps). The data's own types (its structs and maps) are
// pointers and maps here, named by the data (`kind`, and Go's type name in `s`); see data.h.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace sluice::gotemplate {

enum class Type : std::uint8_t {
  invalid,  // Go's zero reflect.Value: a missing map key, a field of nothing; prints "<no value>"
  nil,      // an untyped nil (interface{}(nil)); prints "<nil>"
  boolean,
  integer,   // int, int64
  floating,  // float64
  string,
  strings,   // []string (list == nullptr: a nil slice)
  map,       // a map[string][]string of the type named by `s`: `map` when made in scratch space, else the
             // data's own of the kind `kind` (Data::entries reads it)
  nil_map,   // a nil map of the type named by `s` (and the data's `kind`, for its methods)
  pointer,   // a pointer to one of the data's structs: its `kind`, its type named by `s` ("*http.Request"),
             // and `i` telling two pointers of one kind apart (Go's eq compares pointers)
  nil_pointer,  // a nil pointer of the type named by `s` (*tls.ConnectionState, ...)
};

// map[string][]string with its keys sorted, as Go prints and ranges over maps.
struct StringsMap {
  struct Entry {
    std::string_view key;
    std::uint32_t begin, end;  // into items
  };
  std::vector<Entry> entries;
  std::vector<std::string_view> items;
};

struct Value {
  Type type = Type::invalid;
  std::uint8_t kind = 0;  // map, nil_map, pointer: which of the data's types (the data numbers them)
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string_view s;
  const std::vector<std::string_view>* list = nullptr;  // strings: items [begin, end) of *list
  std::uint32_t begin = 0, end = 0;
  const StringsMap* map = nullptr;  // map

  static Value boolean(bool v) { return Value{.type = Type::boolean, .b = v}; }
  static Value integer(std::int64_t v) { return Value{.type = Type::integer, .i = v}; }
  static Value floating(double v) { return Value{.type = Type::floating, .f = v}; }
  static Value string(std::string_view v) { return Value{.type = Type::string, .s = v}; }
  static Value strings(const std::vector<std::string_view>* l, std::size_t b, std::size_t e) {
    return Value{.type = Type::strings, .list = l, .begin = static_cast<std::uint32_t>(b),
                 .end = static_cast<std::uint32_t>(e)};
  }
  // A value of one of the data's types (map, nil_map, pointer, nil_pointer), or nil.
  static Value of(Type t, std::string_view type_name = {}, std::uint8_t kind = 0) {
    return Value{.type = t, .kind = kind, .s = type_name};
  }

  std::size_t size() const { return end - begin; }
  std::string_view item(std::size_t k) const { return (*list)[begin + k]; }
};

// Storage that lives for one rendering; reused (capacity kept) by the next one on the same thread.
class Scratch {
 public:
  void reset() {
    strings_used_ = lists_used_ = maps_used_ = 0;
    vars.clear();
    args.clear();
  }
  std::string& string() { return take(strings_, strings_used_); }
  std::vector<std::string_view>& list() { return take(lists_, lists_used_); }
  StringsMap& map() {
    auto& m = take(maps_, maps_used_);
    m.entries.clear();
    m.items.clear();
    return m;
  }

  std::vector<std::pair<int, Value>> vars;  // the template's variable stack: (name, value)
  std::vector<Value> args;                   // function arguments being gathered

 private:
  template <class T>
  static T& take(std::deque<T>& pool, std::size_t& used) {
    if (used == pool.size()) pool.emplace_back();  // a deque never moves what it holds
    T& t = pool[used++];
    if constexpr (!std::is_same_v<T, StringsMap>) t.clear();
    return t;
  }

  std::deque<std::string> strings_;
  std::deque<std::vector<std::string_view>> lists_;
  std::deque<StringsMap> maps_;
  std::size_t strings_used_ = 0, lists_used_ = 0, maps_used_ = 0;
};

// A failure while the template runs (Go's ExecError).
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void fail(const std::string& what) { throw EvalError(what); }

// The Go type name of a value, as %T prints it.
std::string_view type_name(const Value& v);
inline bool is_map(const Value& v) { return v.type == Type::map || v.type == Type::nil_map; }

}  // namespace sluice::gotemplate
