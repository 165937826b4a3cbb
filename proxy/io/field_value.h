// A field's value in a request or response head, found by walking the fields in order rather than
// through Beast's tree. Beast looks even a known field up by its name string, with a case-insensitive
// compare at every node; a head holds a handful of fields and each already knows its `http::field`, so
// the walk costs a few instructions per field. As Beast's operator[]: the first field of that name, or
// "" when there is none.
#pragma once

#include <string_view>

#include "common/ascii.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

// The longest field name or value a Beast head holds (it keeps 16-bit offsets): a longer one is refused
// (431 from a client, 502 from the app) before it reaches a head.
inline constexpr std::size_t kMaxFieldBytes = 65533;

template <class Fields>
std::string_view field_value(const Fields& fields, http::field name) {
  for (const auto& f : fields)
    if (f.name() == name) return f.value();
  return {};
}

// For names Beast has no enum for (K-Network-Probe, ...): the length first, then the letters in any case.
template <class Fields>
std::string_view field_value(const Fields& fields, std::string_view name) {
  for (const auto& f : fields) {
    const std::string_view n = f.name_string();
    if (n.size() == name.size() && iequals(n, name)) return f.value();
  }
  return {};
}

template <class Fields>
bool has_field(const Fields& fields, http::field name) {
  for (const auto& f : fields)
    if (f.name() == name) return true;
  return false;
}

}  // namespace sluice::proxy
