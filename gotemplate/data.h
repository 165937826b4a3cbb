// What a template reaches from `.`, as the engine asks for it: the data model behind the values (Go's
// reflection over the caller's types). A binding implements it for its own types — their fields, methods,
// maps, Stringers and Go's declaration order for printing — once per rendering, over scratch space it shares
// with the engine. One virtual call per field, method or map read; the values themselves are views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gotemplate/value.h"

namespace sluice::gotemplate {

// A field or method name as the data model numbers it, fixed when the template is parsed (see
// template.h's MemberOf); 0 is a name the model has no field or method of (a map key, or an error).
using MemberId = std::uint16_t;

// A method's parameters, as Go checks the arguments given to it.
enum class Param : std::uint8_t { string, integer };
struct MethodSig {
  MemberId member;
  std::uint8_t arity;  // at most 2
  Param params[2];
};

class Data {
 public:
  explicit Data(Scratch& scratch) : scratch_(scratch) {}
  virtual ~Data() = default;
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;

  Scratch& scratch() { return scratch_; }

  // The method `m` of `recv`'s type (a pointer or a map of the data's, or nil_map), or null.
  virtual const MethodSig* method(const Value& recv, MemberId m) const = 0;
  // Calls a method `method` returned, with arguments already checked against its parameters.
  virtual Value call(const MethodSig& sig, const Value& recv, const Value* args) = 0;
  // The field `m` of a struct (`recv` is a pointer of the data's); false when its type has none.
  virtual bool field(const Value& recv, MemberId m, Value& out) = 0;

  // A struct's fields in Go's declaration order (fmt prints them so); returns how many.
  struct Field {
    const char* name;
    Value value;
  };
  virtual std::size_t fields(const Value& v, Field* out, std::size_t max) = 0;

  // Whether `v`'s type is a fmt.Stringer (printed by its String method, not as a struct), and String().
  virtual bool is_stringer(const Value& v) const = 0;
  virtual void append_string(const Value& v, std::string& out) = 0;

  // A map's element by key (invalid when absent), and its entries sorted by key (Go ranges over and
  // prints a map so). Maps made in scratch space and nil maps are read here; the data's own (type map,
  // `map` null) through data_entries, and data_key where a lookup need not make every entry.
  Value key(const Value& map, std::string_view key);
  const StringsMap& entries(const Value& map);

 protected:
  virtual const StringsMap& data_entries(const Value& map) = 0;
  virtual Value data_key(const Value& map, std::string_view key) { return find_key(data_entries(map), key); }
  static Value find_key(const StringsMap& m, std::string_view key);

 private:
  Scratch& scratch_;
};

}  // namespace sluice::gotemplate
