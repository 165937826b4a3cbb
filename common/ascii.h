// ASCII text helpers, the one copy of each: case folding (header names, hosts, schemes and the config
// values compared without case are case-insensitive in ASCII only, whatever the locale) and trimming.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// `s` without the leading and trailing characters found in `space`; by default HTTP's optional white
// space (space and tab, RFC 9110 §5.6.3).
inline std::string_view trim(std::string_view s, std::string_view space = " \t") {
  const auto first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

// White space around a line of text or its fields, a CRLF's CR included.
inline constexpr std::string_view kLineSpace = " \t\r\n";

// Equality without ASCII case: header names and tokens, schemes, config values.
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace sluice
