// net/url's reading and printing of a request URL (url.ParseRequestURI, URL.String, url.ParseQuery), from
// the package's documented behaviour: a path keeps its escapes only where they differ from Go's own.
#include "gotemplate/url.h"

#include <algorithm>
#include <cctype>

#include "gotemplate/go_format.h"

namespace sluice::gotemplate {
namespace {

constexpr const char* kHex = "0123456789ABCDEF";

int unhex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// url.shouldEscape for a path (encodePath).
bool path_escapes(unsigned char c) {
  if (std::isalnum(c)) return false;
  switch (c) {
    case '-': case '_': case '.': case '~':
    case '$': case '&': case '+': case ',': case '/': case ':': case ';': case '=': case '@': return false;
    default: return true;
  }
}

void escape_path(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    if (path_escapes(c)) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

// url.unescape; `plus` turns '+' into ' ' (query mode). False on a bad %-escape.
bool unescape(std::string_view s, std::string& out, bool plus) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || unhex(s[i + 1]) < 0 || unhex(s[i + 2]) < 0) return false;
      out += static_cast<char>(unhex(s[i + 1]) << 4 | unhex(s[i + 2]));
      i += 2;
    } else if (plus && s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return true;
}

// url.validEncoded for a path: only characters Go leaves as they are, or %-escapes.
bool valid_encoded_path(std::string_view s) {
  for (unsigned char c : s) {
    if (std::string_view("!$&'()*+,;=:@[]%").find(static_cast<char>(c)) != std::string_view::npos) continue;
    if (path_escapes(c)) return false;
  }
  return true;
}

std::string_view scheme_of(std::string_view s) {  // url.getScheme, "" when there is none
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isalpha(c)) continue;
    if (std::isdigit(c) || c == '+' || c == '-' || c == '.') {
      if (i == 0) return {};
      continue;
    }
    return c == ':' && i > 0 ? s.substr(0, i) : std::string_view{};
  }
  return {};
}

}  // namespace

RequestUrl parse_request_uri(std::string_view target, Scratch& scratch) {
  RequestUrl u;
  std::string_view rest = target;
  if (rest.ends_with('?') && std::count(rest.begin(), rest.end(), '?') == 1) {
    u.force_query = true;
    rest.remove_suffix(1);
  } else if (auto q = rest.find('?'); q != std::string_view::npos) {
    u.raw_query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest == "*") {
    u.path = rest;
    return u;
  }
  if (auto scheme = scheme_of(rest); !scheme.empty()) {
    rest.remove_prefix(scheme.size() + 1);
    if (std::any_of(scheme.begin(), scheme.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); })) {
      auto& lowered = scratch.string();
      for (char c : scheme) lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      scheme = lowered;
    }
    u.scheme = scheme;
    if (!rest.starts_with('/')) {
      u.opaque = rest;
      return u;
    }
    if (rest.starts_with("//")) {
      rest.remove_prefix(2);
      auto slash = rest.find('/');
      auto authority = rest.substr(0, slash);
      rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
      if (auto at = authority.rfind('@'); at != std::string_view::npos) {
        u.has_user = true;
        u.user = authority.substr(0, at);
        authority.remove_prefix(at + 1);
      }
      u.host = authority;
    }
  }
  // URL.setPath: Path unescaped; RawPath only when the target's escaping is not Go's default one.
  if (rest.find('%') == std::string_view::npos) {
    u.path = rest;
  } else {
    auto& decoded = scratch.string();
    if (unescape(rest, decoded, false)) u.path = decoded;
    else u.path = rest;  // Go's server refuses such a target (400); show it as it came
  }
  auto& encoded = scratch.string();
  escape_path(encoded, u.path);
  if (encoded != rest) u.raw_path = rest;
  return u;
}

void append_escaped_path(std::string& out, const RequestUrl& u) {
  if (!u.raw_path.empty() && valid_encoded_path(u.raw_path)) {
    std::string decoded;
    if (unescape(u.raw_path, decoded, false) && decoded == u.path) {
      out += u.raw_path;
      return;
    }
  }
  if (u.path == "*") {
    out += '*';
    return;
  }
  escape_path(out, u.path);
}

void append_url_string(std::string& out, const RequestUrl& u) {
  const auto start = out.size();
  if (!u.scheme.empty()) {
    out += u.scheme;
    out += ':';
  }
  if (!u.opaque.empty()) {
    out += u.opaque;
  } else {
    if (!u.scheme.empty() || !u.host.empty() || u.has_user) {
      if (!u.host.empty() || !u.path.empty() || u.has_user) out += "//";
      if (u.has_user) {
        out += u.user;
        out += '@';
      }
      out += u.host;
    }
    std::string path;
    append_escaped_path(path, u);
    if (!path.empty() && path[0] != '/' && !u.host.empty()) out += '/';
    if (out.size() == start) {  // a first segment with a colon would read as a scheme
      auto segment = std::string_view(path).substr(0, path.find('/'));
      if (segment.find(':') != std::string_view::npos) out += "./";
    }
    out += path;
  }
  if (u.force_query || !u.raw_query.empty()) {
    out += '?';
    out += u.raw_query;
  }
}

void append_request_uri(std::string& out, const RequestUrl& u) {
  if (!u.opaque.empty()) {
    if (u.opaque.starts_with("//")) {
      out += u.scheme;
      out += ':';
    }
    out += u.opaque;
  } else {
    const auto start = out.size();
    append_escaped_path(out, u);
    if (out.size() == start) out += '/';
  }
  if (u.force_query || !u.raw_query.empty()) {
    out += '?';
    out += u.raw_query;
  }
}

std::string_view url_hostname(std::string_view host) {
  auto colon = host.rfind(':');
  if (colon != std::string_view::npos &&
      host.find_first_not_of("0123456789", colon + 1) == std::string_view::npos)
    host = host.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  return host;
}

std::string_view url_port(std::string_view host) {
  auto colon = host.rfind(':');
  if (colon == std::string_view::npos || host.find_first_not_of("0123456789", colon + 1) != std::string_view::npos)
    return {};
  return host.substr(colon + 1);
}

void group_by_key(StringsMap& m, std::vector<std::pair<std::string_view, std::string_view>>& pairs) {
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [key, value] : pairs) {
    if (m.entries.empty() || m.entries.back().key != key) {
      auto at = static_cast<std::uint32_t>(m.items.size());
      m.entries.push_back(StringsMap::Entry{key, at, at});
    }
    m.items.push_back(value);
    ++m.entries.back().end;
  }
}

void parse_query(std::string_view raw, StringsMap& out, Scratch& scratch) {
  thread_local std::vector<std::pair<std::string_view, std::string_view>> pairs;
  pairs.clear();
  while (!raw.empty()) {
    auto amp = raw.find('&');
    auto part = raw.substr(0, amp);
    raw = amp == std::string_view::npos ? std::string_view{} : raw.substr(amp + 1);
    if (part.empty() || part.find(';') != std::string_view::npos) continue;
    auto eq = part.find('=');
    auto& key = scratch.string();
    auto& value = scratch.string();
    if (!unescape(part.substr(0, eq), key, true)) continue;
    if (eq != std::string_view::npos && !unescape(part.substr(eq + 1), value, true)) continue;
    pairs.emplace_back(key, value);
  }
  group_by_key(out, pairs);
}

void append_query_encode(std::string& out, const StringsMap& values) {
  bool first = true;
  for (const auto& e : values.entries) {
    for (auto k = e.begin; k < e.end; ++k) {
      if (!first) out += '&';
      first = false;
      query_escape(out, e.key);
      out += '=';
      query_escape(out, values.items[k]);
    }
  }
}

}  // namespace sluice::gotemplate
