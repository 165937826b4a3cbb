// Go's ServeMux answers; see go_mux.h.
#include "common/go_mux.h"

#include <vector>

namespace sluice::net {
namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// url.PathUnescape; nullopt for a bad escape (Go's server refuses such a target with 400 before the mux).
std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) return std::nullopt;
    out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
    i += 2;
  }
  return out;
}

// url.URL{Path: p}.String()'s escaping of a path.
std::string escape_path(std::string_view p) {
  static constexpr std::string_view kKeep = "-_.~!$&'()*+,;=:@/";
  std::string out;
  for (char c : p) {
    auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
        kKeep.find(c) != std::string_view::npos) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// html.EscapeString, as http.Redirect writes the link.
std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '\'': out += "&#39;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

ControlResponse plain(unsigned status, std::string body) {
  return {.status = status, .body = std::move(body), .headers = {{"X-Content-Type-Options", "nosniff"}}};
}

}  // namespace

std::string_view target_path(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() && std::equal(scheme.begin(), scheme.end(), target.begin(), [](char a, char b) {
          return a == (b >= 'A' && b <= 'Z' ? b + 32 : b);
        })) {
      target.remove_prefix(scheme.size());
      auto slash = target.find_first_of("/?");
      target = slash == std::string_view::npos ? std::string_view{} : target.substr(slash);
      break;
    }
  }
  return target.substr(0, target.find('?'));
}

std::string go_clean_path(std::string_view p) {
  if (p.empty()) return "/";
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < p.size()) {
    auto next = p.find('/', i);
    auto part = p.substr(i, next == std::string_view::npos ? std::string_view::npos : next - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (next == std::string_view::npos) break;
    i = next + 1;
  }
  std::string out;
  for (auto part : parts) {
    out += '/';
    out += part;
  }
  if (out.empty()) out = "/";
  if (p.back() == '/' && out != "/") out += '/';
  return out;
}

std::optional<ControlResponse> go_mux_refusal(const ControlRequest& req, GoMuxPattern pattern) {
  const std::string_view target = req.target();
  const std::string_view raw = target_path(target);
  auto path = unescape(raw);
  if (!path) return ControlResponse{.status = 400, .body = "400 Bad Request"};
  std::string clean = go_clean_path(*path);
  if (clean != raw) {
    std::string location = escape_path(clean);
    if (auto q = target.find('?'); q != std::string_view::npos && q + 1 < target.size())
      location += target.substr(q);
    ControlResponse r{.status = 301, .content_type = "", .headers = {{"Location", location}}};
    const auto method = req.method();
    if (method == http::verb::get || method == http::verb::head) r.content_type = "text/html; charset=utf-8";
    if (method == http::verb::get) r.body = "<a href=\"" + html_escape(location) + "\">Moved Permanently</a>.\n\n";
    return r;
  }
  if (clean != pattern.path) return plain(404, "404 page not found\n");
  if (pattern.get_only && req.method() != http::verb::get && req.method() != http::verb::head) {
    auto r = plain(405, "Method Not Allowed\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  return std::nullopt;
}

}  // namespace sluice::net
