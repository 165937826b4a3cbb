// Line-oriented parsing of `key: value` configuration text (no YAML library: the format is this flat).
#include "autoscaler/config_text.h"

#include <string>

#include "common/ascii.h"
#include "common/config_error.h"

namespace sluice::autoscaler {
namespace {

std::string_view unquote(std::string_view s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

}  // namespace

ConfigData parse_config_text(std::string_view text, std::string_view source) {
  ConfigData data;
  int line_no = 0;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    ++line_no;
    line = trim(line, kLineSpace);
    if (line.empty() || line.front() == '#' || line == "data:") continue;
    const auto where = std::string(source) + " line " + std::to_string(line_no);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      throw ConfigError(where + ": '" + std::string(line) + "' is not allowed: expected 'key: value'");
    }
    const auto key = std::string(trim(line.substr(0, colon), kLineSpace));
    const auto value = std::string(unquote(trim(line.substr(colon + 1), kLineSpace)));
    if (key.empty()) throw ConfigError(where + ": a key is missing before ':'");
    if (!data.emplace(key, value).second) {
      throw ConfigError(where + ": key '" + key + "' is repeated");
    }
  }
  return data;
}

}  // namespace sluice::autoscaler
