// YAML values with positions; see yaml_fields.h.
#include "app/gateway/yaml_fields.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>

#include "autoscaler/go_duration.h"
#include "common/config_error.h"

namespace sluice::app::gateway {

std::string where(const std::string& source, const YAML::Node& node) {
  std::string w = source;
  if (node.IsDefined() && node.Mark().line >= 0) w += ":" + std::to_string(node.Mark().line + 1);
  return w;
}

void fail(const std::string& source, const YAML::Node& node, const std::string& path, const std::string& what) {
  throw ConfigError(where(source, node) + ": " + path + ": " + what);
}

std::string scalar(const std::string& source, const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) fail(source, n, path, "must be a single value");
  return n.Scalar();
}

bool boolean(const std::string& source, const YAML::Node& n, const std::string& path) {
  auto v = scalar(source, n, path);
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  fail(source, n, path, "'" + v + "' is not true or false");
}

long long integer(const std::string& source, const YAML::Node& n, const std::string& path, long long lo,
                  long long hi) {
  auto v = scalar(source, n, path);
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used == v.size() && x >= lo && x <= hi) return x;
  } catch (const std::exception&) {
  }
  fail(source, n, path, "'" + v + "' is not a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

Millis duration(const std::string& source, const YAML::Node& n, const std::string& path) {
  auto v = scalar(source, n, path);
  if (!v.empty() && v.size() <= 9 &&
      std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::chrono::seconds(std::stoll(v));
  if (auto d = autoscaler::parse_go_duration(v); d && *d >= autoscaler::Duration::zero())
    return std::chrono::duration_cast<Millis>(*d);
  fail(source, n, path, "'" + v + "' is not a duration such as 30s, 1m30s or 500ms");
}

namespace {

// Where the command word of a simple command begins, past its leading NAME=value words (quotes and
// backslashes in a value kept whole); text.size() when there is none.
std::size_t command_word(const std::string& text) {
  std::size_t at = text.find_first_not_of(" \t");
  while (at != std::string::npos && at < text.size()) {
    std::size_t name = at;
    while (name < text.size() && (std::isalnum(static_cast<unsigned char>(text[name])) || text[name] == '_')) ++name;
    const bool assignment = name > at && !std::isdigit(static_cast<unsigned char>(text[at])) && name < text.size() &&
                            text[name] == '=';
    if (!assignment) return at;
    char quote = 0;
    std::size_t end = name + 1;
    for (; end < text.size(); ++end) {
      const char c = text[end];
      if (quote) {
        if (c == quote) quote = 0;
        else if (c == '\\' && quote == '"') ++end;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '\\') {
        ++end;
      } else if (c == ' ' || c == '\t') {
        break;
      }
    }
    at = end < text.size() ? text.find_first_not_of(" \t", end) : std::string::npos;
  }
  return text.size();
}

}  // namespace

std::vector<std::string> shell_command(const std::string& text) {
  bool compound = text.find_first_of(";&|\n`()<>") != std::string::npos;
  if (compound) return {"/bin/sh", "-c", text};
  // The shell is replaced by the command (signals reach the app itself). Leading NAME=value words (a
  // Procfile's `web: NAME=value cmd`) stay before `exec`, which exports them to the command; after it they
  // would be taken for the command's name.
  const std::size_t word = command_word(text);
  if (word >= text.size()) return {"/bin/sh", "-c", text};
  // `exec ./server` (a Procfile and Dockerfile habit) execs already: a second exec would be taken for the
  // command's name.
  if (const auto rest = std::string_view(text).substr(word); rest == "exec" || rest.starts_with("exec ") || rest.starts_with("exec\t"))
    return {"/bin/sh", "-c", text};
  return {"/bin/sh", "-c", text.substr(0, word) + "exec " + text.substr(word)};
}

std::vector<std::string> command_of(const std::string& source, const YAML::Node& n, const std::string& path) {
  std::vector<std::string> argv;
  if (n.IsScalar()) {
    argv = shell_command(n.Scalar());
  } else if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i) argv.push_back(scalar(source, n[i], path + "[" + std::to_string(i) + "]"));
  } else {
    fail(source, n, path, "must be a string (run by /bin/sh) or a list of arguments");
  }
  if (argv.empty() || argv[0].empty()) fail(source, n, path, "is empty");
  return argv;
}

void Errors::throw_if_any(const std::string& source) const {
  if (list_.empty()) return;
  if (list_.size() == 1) throw ConfigError(list_.front());
  // In the file's order, as an editor shows it: by the line each names ("SOURCE:LINE: ..."); the parser
  // finds some (a service's autoscaling keys, cross-key checks) after the lines that follow them.
  const auto line_of = [&](const std::string& e) {
    if (e.compare(0, source.size() + 1, source + ":") != 0) return std::numeric_limits<long>::max();
    char* end = nullptr;
    const long line = std::strtol(e.c_str() + source.size() + 1, &end, 10);
    return end && *end == ':' ? line : std::numeric_limits<long>::max();
  };
  auto sorted = list_;
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) { return line_of(a) < line_of(b); });
  std::string all = std::to_string(sorted.size()) + " errors in " + source + ":";
  for (const auto& e : sorted) all += "\n  " + e;
  throw ConfigError(all);
}

}  // namespace sluice::app::gateway
