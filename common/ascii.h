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

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace sluice
