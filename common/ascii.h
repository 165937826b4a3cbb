// ASCII case folding, the one copy: header names, hosts, schemes and the config values compared without
// case are case-insensitive in ASCII only, whatever the locale.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace sluice
