// RFC 9112 head rules; see strict.h.
#include "proxy/codec/h1/strict.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "common/ascii.h"
#include "proxy/exchange/exchange.h"
#include "proxy/exchange/headers.h"

namespace sluice::proxy::h1 {
namespace {

// boost::system::error_category's destructor is protected and non-virtual, as categories are never
// deleted through it; GCC warns about every derived class anyway.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
class ViolationCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "sluice.h1.rfc9112"; }
  std::string message(int v) const override {
    switch (static_cast<Violation>(v)) {
      case Violation::bare_cr: return "CR without LF";
      case Violation::bare_lf: return "LF without CR";
      case Violation::obs_fold: return "obsolete line folding (obs-fold) in the header";
      case Violation::bad_request_line: return "malformed request line";
      case Violation::bad_target: return "invalid request target";
      case Violation::target_too_long: return "request target too long";
      case Violation::bad_version: return "malformed HTTP version";
      case Violation::unsupported_version: return "HTTP version not supported";
      case Violation::missing_host: return "missing Host header";
      case Violation::several_hosts: return "more than one Host header";
      case Violation::bad_host: return "invalid Host header";
      case Violation::te_in_http10: return "Transfer-Encoding in an HTTP/1.0 message";
      case Violation::te_not_chunked: return "Transfer-Encoding whose final coding is not chunked";
      case Violation::te_chunked_twice: return "chunked applied more than once";
      case Violation::te_unsupported: return "transfer coding not implemented (only chunked is)";
      case Violation::several_content_lengths: return "more than one Content-Length value";
      case Violation::content_length_and_te: return "both Content-Length and Transfer-Encoding";
      case Violation::header_too_large: return "header fields too large";
      case Violation::field_too_large: return "a header field longer than 65533 bytes";
      case Violation::bad_trailer_declared: return "Trailer names Content-Length, Transfer-Encoding or Trailer";
    }
    return "malformed message";
  }
};
#pragma GCC diagnostic pop

constexpr bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A byte → membership table for a character class: letters, digits and the bytes of `extra`.
struct CharClass {
  constexpr explicit CharClass(std::string_view extra) {
    for (int c = 0; c < 256; ++c) member[c] = is_alpha(static_cast<char>(c)) || is_digit(static_cast<char>(c));
    for (char c : extra) member[static_cast<unsigned char>(c)] = true;
  }
  constexpr bool operator()(char c) const { return member[static_cast<unsigned char>(c)]; }
  bool member[256]{};
};

// RFC 9110 §5.6.2 tchar.
constexpr CharClass is_tchar("!#$%&'*+-.^_`|~");

// RFC 3986 unreserved / sub-delims / pct-encoded's '%'.
constexpr CharClass is_reg_name_char("-._~!$&'()*+,;=%");

// The characters a request target may hold: RFC 3986's unreserved, reserved and '%', '#' excepted (a
// fragment is never sent, RFC 9112 §3.2), plus the printable ASCII that RFC 3986 calls unsafe but nginx
// and Go's net/http (queue-proxy) accept, so clients that send `{a|b}` unencoded keep working. Rejecting
// an invalid target is a SHOULD (RFC 9112 §3); 8-bit bytes, controls and spaces are refused.
constexpr CharClass is_target_char("-._~!$&'()*+,;=%:/?@[]\"<>\\^`{|}");

// uri-host [":" port] (RFC 9112 §3.2, RFC 3986 §3.2.2); empty is allowed (a target without authority).
bool valid_host(std::string_view h) {
  std::size_t i = 0;
  if (!h.empty() && h[0] == '[') {
    auto close = h.find(']');
    if (close == std::string_view::npos || close < 2) return false;
    for (char c : h.substr(1, close - 1))
      if (!is_hex(c) && c != ':' && c != '.' && c != 'v' && c != 'V') return false;
    i = close + 1;
  } else {
    while (i < h.size() && h[i] != ':') {
      if (!is_reg_name_char(h[i])) return false;
      ++i;
    }
  }
  if (i == h.size()) return true;
  if (h[i] != ':') return false;
  for (char c : h.substr(i + 1))
    if (!is_digit(c)) return false;
  return true;
}

bool is_absolute_form(std::string_view target) {
  auto colon = target.find("://");
  if (colon == std::string_view::npos || colon == 0 || !is_alpha(target[0])) return false;
  for (char c : target.substr(0, colon))
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return false;
  return true;
}

// Framing fields, shared by requests and responses (RFC 9112 §6.1, §6.3). One walk over the head, in
// order (Beast's own lookups compare names at every node of its tree).
error_code check_framing(const http::fields& f, unsigned version) {
  std::size_t lengths = 0;
  bool has_te = false, chunked_last = false;
  std::size_t chunked = 0, others = 0;
  for (const auto& field : f) {
    if (field.name() == http::field::content_length) {
      ++lengths;
      if (field.value().find(',') != std::string_view::npos) return Violation::several_content_lengths;
      continue;
    }
    if (field.name() != http::field::transfer_encoding) continue;
    has_te = true;
    std::string_view rest = field.value();
    while (true) {
      auto comma = rest.find(',');
      auto coding = trim(rest.substr(0, comma));
      if (!coding.empty()) {  // the list rule allows empty elements
        chunked_last = iequals(coding, "chunked");
        if (chunked_last) ++chunked;
        else ++others;
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (lengths > 1) return Violation::several_content_lengths;
  if (!has_te) return {};
  if (version < 11) return Violation::te_in_http10;
  if (lengths > 0) return Violation::content_length_and_te;
  if (!chunked_last) return Violation::te_not_chunked;
  if (chunked > 1) return Violation::te_chunked_twice;
  if (others > 0) return Violation::te_unsupported;
  return {};
}

}  // namespace

std::optional<std::string_view> absolute_form_authority(std::string_view target) {
  if (!is_absolute_form(target)) return std::nullopt;
  return target_authority(target);
}

const boost::system::error_category& violation_category() {
  static const ViolationCategory category;
  return category;
}

unsigned violation_status(error_code ec) {
  if (!is_violation(ec)) return 400;
  switch (static_cast<Violation>(ec.value())) {
    case Violation::target_too_long: return 414;
    case Violation::unsupported_version: return 505;
    case Violation::te_unsupported: return 501;
    case Violation::header_too_large:
    case Violation::field_too_large: return 431;
    default: return 400;
  }
}

namespace {

// A response's status line, as far as repair_response_head mends it: another major version than 1 (Go
// reads any HTTP/x.y) and no SP before an empty reason.
void note_status_line(std::string_view line, HeadScan& scan) {
  if (line.size() < 12 || !line.starts_with("HTTP/") || line[6] != '.' || line[8] != ' ') return;  // Beast says why
  if (line[5] != '1' || line[7] > '1' || line.size() == 12) scan.repair = true;
}

void note_response_field(std::string_view line, HeadScan& scan) {
  scan.fields_started = true;
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return;  // Beast refuses it, as Go does
  if (line[colon - 1] == ' ' || line[colon - 1] == '\t') scan.repair = true;
  const auto name = trim(line.substr(0, colon));
  if (name.size() == 14 && iequals(name, "content-length")) {
    if (scan.lengths < 2) ++scan.lengths;
  } else if (name.size() == 17 && iequals(name, "transfer-encoding")) {
    scan.transfer_encoding = true;
  }
}

}  // namespace

std::size_t scan_head(std::string_view data, HeadScan& scan, const HeadRules& rules, error_code& ec) {
  // A line at a time: memchr finds its LF and then any CR before it, so the bytes of a field are not
  // looked at one by one. The violations are still found in the order of their bytes.
  const char* const base = data.data();
  const std::size_t size = data.size();
  std::size_t i = scan.pos;
  while (i < size) {
    // A line that starts with whitespace continues the previous field (obs-fold) or, first after the
    // start line, would be read as part of it by some and dropped by others (RFC 9112 §2.2, §5.2). A
    // response's fold is unfolded (§5.2 lets a proxy replace it with SP), not its first field line.
    if (i == scan.line && i > 0 && (base[i] == ' ' || base[i] == '\t')) {
      if (rules.request || !scan.fields_started) {
        ec = Violation::obs_fold;
        return 0;
      }
      scan.repair = true;
    }
    const auto* lf = static_cast<const char*>(std::memchr(base + i, '\n', size - i));
    const std::size_t eol = lf ? static_cast<std::size_t>(lf - base) : size;
    // Up to the LF (or what has arrived), a CR may only be the last byte before it.
    if (const auto* cr = static_cast<const char*>(std::memchr(base + i, '\r', eol - i))) {
      const auto at = static_cast<std::size_t>(cr - base);
      if (at + 1 == size) {  // its LF has not arrived yet
        i = at;
        break;
      }
      if (at + 1 != eol) {
        ec = Violation::bare_cr;
        return 0;
      }
    }
    if (!lf) {
      i = size;
      break;
    }
    const bool crlf = eol > 0 && base[eol - 1] == '\r';
    if (!crlf) {  // a response's bare LF ends a line (§2.2 lets a recipient read it so)
      if (rules.request) {
        ec = Violation::bare_lf;
        return 0;
      }
      scan.repair = true;
    }
    const std::string_view line(base + scan.line, (crlf ? eol - 1 : eol) - scan.line);
    scan.line = eol + 1;
    if (!scan.start_line_done) {
      scan.start_line_done = true;
      if (rules.request) {
        if ((ec = check_request_line(line, rules))) return 0;
        if (line.back() > '1') scan.newer_minor_at = static_cast<std::size_t>(line.data() - base) + line.size() - 1;
      } else {
        note_status_line(line, scan);
      }
    } else if (line.empty()) {
      scan.pos = eol + 1;
      return eol + 1;  // the empty line: the end of the head
    } else if (!rules.request) {
      note_response_field(line, scan);
    }
    i = eol + 1;
  }
  scan.pos = i;
  // A request line that never ends: say 414 as soon as its target alone is too long.
  if (rules.request && !scan.start_line_done) {
    auto sp = data.find(' ');
    if (sp != std::string_view::npos && data.size() - sp - 1 > rules.max_target_bytes &&
        data.find(' ', sp + 1) == std::string_view::npos) {
      ec = Violation::target_too_long;
    }
  }
  return 0;
}

std::string repair_response_head(std::string_view head) {
  // The logical lines: line ends without their CR, folds joined to the line they continue.
  std::vector<std::string> lines;
  std::size_t i = 0;
  while (i < head.size()) {
    auto lf = head.find('\n', i);
    if (lf == std::string_view::npos) lf = head.size();
    auto line = head.substr(i, lf - i);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    i = lf + 1;
    if (line.empty()) break;
    if (lines.size() > 1 && (line[0] == ' ' || line[0] == '\t')) {
      auto& prev = lines.back();
      while (!prev.empty() && (prev.back() == ' ' || prev.back() == '\t')) prev.pop_back();
      prev += ' ';
      prev += trim(line);
      continue;
    }
    lines.emplace_back(line);
  }
  if (lines.empty()) return std::string(head);
  std::string& status = lines[0];
  if (status.size() >= 12 && status.starts_with("HTTP/") && (status[5] != '1' || status[7] > '1'))
    status.replace(5, 3, "1.1");
  if (status.size() == 12) status += ' ';
  // Fields: no whitespace before the colon; the framing fields noted.
  std::string_view length;
  bool lengths = false, lengths_agree = true, coded = false;  // coded: any Transfer-Encoding
  std::vector<bool> is_length(lines.size(), false);
  for (std::size_t n = 1; n < lines.size(); ++n) {
    auto& line = lines[n];
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto name_end = colon;
    while (name_end > 0 && (line[name_end - 1] == ' ' || line[name_end - 1] == '\t')) --name_end;
    line.erase(name_end, colon - name_end);
    const std::string_view name(line.data(), name_end);
    const auto value = trim(std::string_view(line).substr(name_end + 1));
    if (iequals(name, "content-length")) {
      is_length[n] = true;
      if (!lengths) length = value;
      else lengths_agree = lengths_agree && value == length;
      lengths = true;
    } else if (iequals(name, "transfer-encoding")) {
      coded = true;
    }
  }
  std::string out;
  out.reserve(head.size() + 24);
  bool length_kept = false;
  for (std::size_t n = 0; n < lines.size(); ++n) {
    if (is_length[n] && (coded || (lengths_agree && length_kept))) continue;
    length_kept = length_kept || is_length[n];
    out += lines[n];
    out += "\r\n";
  }
  if (coded && lengths) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

error_code check_request_line(std::string_view line, const HeadRules& rules) {
  // method SP request-target SP HTTP-version (RFC 9112 §3): one space each, nothing else.
  auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return Violation::bad_request_line;
  auto method = line.substr(0, sp1);
  for (char c : method)
    if (!is_tchar(c)) return Violation::bad_request_line;
  auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return Violation::bad_request_line;
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  if (target.size() > rules.max_target_bytes) return Violation::target_too_long;
  if (target.empty()) return Violation::bad_request_line;
  for (char c : target)
    if (!is_target_char(c)) return Violation::bad_target;
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !is_digit(version[5]) || version[6] != '.' ||
      !is_digit(version[7]))
    return version.find(' ') != std::string_view::npos ? Violation::bad_request_line : Violation::bad_version;
  // HTTP/1.x with a higher minor version is read as HTTP/1.1 (RFC 9110 §2.5; queue-proxy serves it too).
  if (version[5] != '1') return Violation::unsupported_version;
  // The target's form must suit the method (RFC 9112 §3.2).
  const bool connect = method == "CONNECT";
  if (target == "*") return method == "OPTIONS" ? error_code{} : error_code(Violation::bad_target);
  if (target[0] == '/') return connect ? error_code(Violation::bad_target) : error_code{};
  if (is_absolute_form(target))
    return connect || !valid_host(target_authority(target)) ? error_code(Violation::bad_target) : error_code{};
  // authority-form
  return connect && valid_host(target) ? error_code{} : error_code(Violation::bad_target);
}

error_code check_request_fields(const http::request_header<>& req) {
  const unsigned version = req.version();
  std::size_t hosts = 0;
  std::string_view host;
  // The activator's K-Original-Host becomes the app's Host (proxy/forward/request_fields.cpp): the same syntax holds.
  std::optional<std::string_view> original_host;
  for (const auto& f : req) {
    if (f.name() == http::field::host) {
      ++hosts;
      host = f.value();
    } else if (f.name() == http::field::unknown && !original_host) {
      const auto name = f.name_string();
      if (name.size() == kOriginalHostHeader.size() && iequals(name, kOriginalHostHeader)) original_host = f.value();
    }
  }
  if (hosts > 1) return Violation::several_hosts;
  if (hosts == 0 && version >= 11) return Violation::missing_host;
  if (hosts == 1 && !valid_host(host)) return Violation::bad_host;
  if (original_host && !valid_host(*original_host)) return Violation::bad_host;
  return check_framing(req, version);
}

bool stuck_on_chunk_line(std::string_view data) {
  if (data.starts_with("\r\n")) data.remove_prefix(2);
  auto eol = data.find("\r\n");
  if (eol == std::string_view::npos) return false;  // the line is still arriving
  // Any chunk line but the last is whole here; the last chunk waits for its trailer section, and once
  // that has ended (CRLF CRLF) nothing more can help either.
  for (char c : data.substr(0, eol)) {
    if (!is_hex(c)) break;
    if (c != '0') return true;
  }
  return data.find("\r\n\r\n") != std::string_view::npos;
}

error_code check_response_fields(const http::response_header<>& res) {
  // A trailer may not carry the framing (Go's transport refuses such a head, and Beast would take a
  // Content-Length trailer as the body's length).
  for (const auto& f : res) {
    if (f.name() != http::field::trailer) continue;
    std::string_view rest = f.value();
    while (!rest.empty()) {
      auto comma = rest.find(',');
      auto name = trim(rest.substr(0, comma));
      if (iequals(name, "content-length") || iequals(name, "transfer-encoding") || iequals(name, "trailer"))
        return Violation::bad_trailer_declared;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return check_framing(res, res.version());
}

}  // namespace sluice::proxy::h1
