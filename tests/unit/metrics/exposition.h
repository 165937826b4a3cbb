// Reading Prometheus text exposition in the metrics tests.
#pragma once

#include <string>

namespace sluice::metrics::test {

// The first line that starts with `prefix` and contains `must_contain`.
inline std::string line_with(const std::string& text, const std::string& prefix, const std::string& must_contain) {
  std::size_t pos = 0;
  while ((pos = text.find(prefix, pos)) != std::string::npos) {
    if (pos > 0 && text[pos - 1] != '\n') {
      ++pos;
      continue;
    }
    auto end = text.find('\n', pos);
    auto line = text.substr(pos, end - pos);
    if (line.find(must_contain) != std::string::npos) return line;
    pos = end;
  }
  return {};
}

}  // namespace sluice::metrics::test
