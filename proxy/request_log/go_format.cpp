// Go's value spellings and escapes; see go_format.h.
#include "proxy/request_log/go_format.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace sluice::proxy::request_log {

std::string canonical(std::string_view name) {
  std::string out(name);
  bool upper = true;
  for (auto& c : out) {
    c = upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
              : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    upper = c == '-';
  }
  return out;
}

void append_go_float(std::string& out, double d) {
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view s(buf, static_cast<std::size_t>(sci.ptr - buf));
  auto e = s.find('e');
  int exp = std::atoi(std::string(s.substr(e + 1)).c_str());
  if (exp < -4 || exp >= 21) {  // fmt's %v: shortest digits, %e beyond these exponents
    out += s;
    return;
  }
  auto fixed = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  out.append(buf, fixed.ptr);
}

void js_escape(std::string& out, std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += "\\\""; break;
      case '<': out += "\\u003C"; break;
      case '>': out += "\\u003E"; break;
      case '&': out += "\\u0026"; break;
      case '=': out += "\\u003D"; break;
      default:
        if (c < ' ') {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

void html_escape(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\0': out += "\xEF\xBF\xBD"; break;
      default: out += c;
    }
  }
}

void query_escape(std::string& out, std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else if (c == ' ') out += '+';
    else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
}

}  // namespace sluice::proxy::request_log
