// A small data model to run templates over, as a Go program would hand text/template a value:
//
//   type Address struct{ City, Country string }      // *Address is a fmt.Stringer: "City, Country"
//   type Labels map[string][]string                   // read through the model, not made in scratch space
//   type Person struct {
//     Name   string
//     Age    int
//     Tags   []string
//     Friend *Person                                  // nil
//     Home   *Address
//     Attrs  map[string][]string
//     Labels Labels
//   }
//   func (p *Person) Greet(whom string) string       // "Hello <whom>, I am <Name>"
//   func (p *Person) Older(years int) int
//   func (l Labels) Get(key string) string
//
// with `.` a *Person{Name: "Ann", Age: 42, Tags: {"go", "c++"}, Home: &Address{"Oslo", "NO"},
// Attrs: {"k": {"v"}}, Labels: {"team": {"core"}, "app": {"web", "api"}}}.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gotemplate/data.h"

namespace sluice::gotemplate::testing {

enum Member : MemberId { other, Name, Age, Tags, Friend, Home, Attrs, Labels, Greet, Older, City, Country, Get };
enum Kind : std::uint8_t { person = 1, address, labels };

inline MemberId member_of(std::string_view name) {
  static constexpr std::string_view kNames[] = {"",      "Name",   "Age",   "Tags",  "Friend", "Home", "Attrs",
                                                "Labels", "Greet", "Older", "City",  "Country", "Get"};
  for (MemberId k = 1; k < std::size(kNames); ++k)
    if (kNames[k] == name) return k;
  return other;
}

class PersonModel final : public Data {
 public:
  explicit PersonModel(Scratch& scratch) : Data(scratch) {
    attrs_.items = {"v"};
    attrs_.entries = {{"k", 0, 1}};
  }

  static Value root() { return Value::of(Type::pointer, "*main.Person", Kind::person); }

  const MethodSig* method(const Value& recv, MemberId m) const override {
    static constexpr MethodSig kGreet{Greet, 1, {Param::string}}, kOlder{Older, 1, {Param::integer}},
        kGet{Get, 1, {Param::string}};
    if (recv.kind == Kind::person) return m == Greet ? &kGreet : m == Older ? &kOlder : nullptr;
    if (recv.kind == Kind::labels && m == Get) return &kGet;
    return nullptr;
  }

  Value call(const MethodSig& sig, const Value& recv, const Value* args) override {
    if (sig.member == Older) return Value::integer(42 + args[0].i);
    if (sig.member == Get) {
      Value v = key(recv, args[0].s);
      return Value::string(v.type == Type::strings && v.size() ? v.item(0) : std::string_view{});
    }
    auto& s = scratch().string();
    s = "Hello ";
    s += args[0].s;
    s += ", I am Ann";
    return Value::string(s);
  }

  bool field(const Value& recv, MemberId m, Value& out) override {
    if (recv.kind == Kind::address) {
      if (m != City && m != Country) return false;
      out = Value::string(m == City ? "Oslo" : "NO");
      return true;
    }
    switch (m) {
      case Name: out = Value::string("Ann"); return true;
      case Age: out = Value::integer(42); return true;
      case Tags: out = Value::strings(&tags_, 0, tags_.size()); return true;
      case Friend: out = Value::of(Type::nil_pointer, "*main.Person"); return true;
      case Home: out = Value::of(Type::pointer, "*main.Address", Kind::address); return true;
      case Attrs: out = Value::of(Type::map, "map[string][]string"), out.map = &attrs_; return true;
      case Labels: out = Value::of(Type::map, "main.Labels", Kind::labels); return true;
      default: return false;
    }
  }

  std::size_t fields(const Value& v, Field* out, std::size_t max) override {
    static constexpr const char* kPerson[] = {"Name", "Age", "Tags", "Friend", "Home", "Attrs", "Labels"};
    static constexpr const char* kAddress[] = {"City", "Country"};
    const bool person = v.kind == Kind::person;
    const std::size_t n = std::min<std::size_t>(person ? std::size(kPerson) : std::size(kAddress), max);
    for (std::size_t k = 0; k < n; ++k) {
      out[k].name = person ? kPerson[k] : kAddress[k];
      field(v, person ? static_cast<MemberId>(Name + k) : static_cast<MemberId>(City + k), out[k].value);
    }
    return n;
  }

  bool is_stringer(const Value& v) const override { return v.kind == Kind::address; }
  void append_string(const Value&, std::string& out) override { out += "Oslo, NO"; }

  int labels_built = 0;  // how often the Labels map was made: once per rendering at most

 protected:
  const StringsMap& data_entries(const Value&) override {
    if (labels_.entries.empty()) {
      ++labels_built;
      labels_.items = {"web", "api", "core"};
      labels_.entries = {{"app", 0, 2}, {"team", 2, 3}};  // sorted by key
    }
    return labels_;
  }

 private:
  const std::vector<std::string_view> tags_ = {"go", "c++"};
  StringsMap attrs_, labels_;
};

}  // namespace sluice::gotemplate::testing
