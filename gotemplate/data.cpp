// The maps the engine reads without the data: those made in scratch space, and nil maps; see data.h.
#include "gotemplate/data.h"

namespace sluice::gotemplate {
namespace {

const StringsMap kEmptyMap;

}  // namespace

Value Data::find_key(const StringsMap& m, std::string_view key) {
  for (const auto& e : m.entries)
    if (e.key == key) return Value::strings(&m.items, e.begin, e.end);
  return {};
}

Value Data::key(const Value& map, std::string_view key) {
  if (map.type != Type::map) return {};
  return map.map ? find_key(*map.map, key) : data_key(map, key);
}

const StringsMap& Data::entries(const Value& map) {
  if (map.type != Type::map) return kEmptyMap;
  return map.map ? *map.map : data_entries(map);
}

}  // namespace sluice::gotemplate
