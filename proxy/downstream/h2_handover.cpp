// Upgrade helpers; see handover.h.
#include "proxy/downstream/h2_handover.h"

#include "common/ascii.h"

namespace sluice::proxy::h2 {

bool is_bad_preface(std::string_view first_bytes) {
  while (first_bytes.starts_with("\r\n")) first_bytes.remove_prefix(2);  // RFC 9112 §2.2: empty lines first
  auto eol = first_bytes.find("\r\n");
  if (eol == std::string_view::npos) return false;  // not a whole line yet: the h1 codec decides
  const auto line = ascii_lower(first_bytes.substr(0, eol));
  if (line.find("http/") != std::string::npos) return false;  // a version, however malformed: HTTP/1.x's 4xx/505
  // Without one, a request line still shows in its target: origin-form, asterisk-form or absolute-form.
  auto sp = line.find_first_of(" \t");
  if (sp == std::string::npos) return true;
  auto target = std::string_view(line).substr(sp + 1);
  while (!target.empty() && (target.front() == ' ' || target.front() == '\t')) target.remove_prefix(1);
  return !(target.starts_with('/') || target.starts_with('*') || target.substr(0, target.find(' ')).find("://") !=
                                                                        std::string_view::npos);
}

std::string_view bad_preface_answer() {
  static constexpr char kAnswer[] =
      "\0\0\0\x04\0\0\0\0\0"                   // SETTINGS, empty
      "\0\0\x08\x07\0\0\0\0\0\0\0\0\0\0\0\0\x01";  // GOAWAY, last stream 0, PROTOCOL_ERROR
  return {kAnswer, sizeof kAnswer - 1};
}

std::optional<std::string> decode_base64url(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-' || c == '+') return 62;
    if (c == '_' || c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace sluice::proxy::h2
