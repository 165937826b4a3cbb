// Knative's RequestLogTemplateInput over sluice's exchange: what a template reaches from `.` — the fields and
// methods of .Request (net/http's Request as Go's server fills it), .Request.URL, .Request.Header (and the
// query's url.Values), .Response, .Revision and .TraceID.
#pragma once

#include <optional>

#include "proxy/request_log/program.h"
#include "proxy/request_log/template.h"
#include "proxy/request_log/url.h"
#include "proxy/request_log/value.h"

namespace sluice::proxy::request_log {

// A method's parameters, as Go checks the arguments given to it.
enum class Param : std::uint8_t { string, integer };
struct MethodSig {
  Member member;
  std::uint8_t arity;
  Param params[2];
};

class Data {
 public:
  Data(const RequestLogInput& in, Scratch& scratch) : in_(in), scratch_(scratch) {}

  Value root() const { return Value::of(Type::input); }
  Scratch& scratch() { return scratch_; }

  // The method `m` of `recv`'s type, or null.
  const MethodSig* method(const Value& recv, Member m) const;
  Value call(const MethodSig& sig, const Value& recv, const Value* args);
  // The field `m` of a struct value; false when its type has none.
  bool field(const Value& recv, Member m, Value& out);
  // A map's element by key; invalid when absent.
  Value key(const Value& map, std::string_view key);
  const StringsMap& entries(const Value& map);  // sorted by key

  // A struct's fields in Go's declaration order (fmt prints them so); returns how many.
  struct Field {
    const char* name;
    Value value;
  };
  std::size_t fields(const Value& v, Field* out, std::size_t max);
  void append_url(std::string& out);  // URL.String()

  std::string_view method_name() const;
  std::string_view target() const;

 private:
  const RequestUrl& url();
  std::string_view header_get(std::string_view name) const;  // Header.Get: the first value, any case
  Value header_values(std::string_view name, bool exact);      // nil when absent
  std::int64_t content_length() const;

  const RequestLogInput& in_;
  Scratch& scratch_;
  std::optional<RequestUrl> url_;
  const StringsMap* header_map_ = nullptr;
  const StringsMap* query_map_ = nullptr;
};

}  // namespace sluice::proxy::request_log
