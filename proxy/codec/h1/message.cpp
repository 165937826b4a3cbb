// HTTP/1.1 message heads; see message.h.
#include "proxy/codec/h1/message.h"

#include <charconv>
#include <cstring>

#include "proxy/codec/h1/strict.h"
#include "proxy/exchange/headers.h"
#include "proxy/io/field_value.h"

namespace sluice::proxy::h1 {
namespace {

void append_uint(std::string& out, std::uint64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  out.append(tmp, r.ptr);
}

// One resize and two copies rather than four appends, each with its own capacity check: a head has
// a dozen fields and this is most of the time spent writing one.
void append_field(std::string& out, std::string_view name, std::string_view value) {
  const std::size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  if (!value.empty()) std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

void append_framing(std::string& out, const BodyInfo& body) {
  if (body.kind == BodyKind::unknown) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (body.content_length) {
    // An explicit zero is kept: some apps insist on it for POST.
    out += "Content-Length: ";
    append_uint(out, *body.content_length);
    out += "\r\n";
  }
}

// "HTTP/1.1 NNN Reason\r\n"
void append_status_line(std::string& out, unsigned status) {
  out += "HTTP/1.1 ";
  append_uint(out, status);
  out += ' ';
  if (auto reason = reason_phrase(status); !reason.empty()) {
    out += reason;
  } else {
    out += "status code ";
    append_uint(out, status);
  }
  out += "\r\n";
}

}  // namespace

std::string_view reason_phrase(unsigned status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 102: return "Processing";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 207: return "Multi-Status";
    case 208: return "Already Reported";
    case 226: return "IM Used";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Request Entity Too Large";
    case 414: return "Request URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Requested Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 418: return "I'm a teapot";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Entity";
    case 423: return "Locked";
    case 424: return "Failed Dependency";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 506: return "Variant Also Negotiates";
    case 507: return "Insufficient Storage";
    case 508: return "Loop Detected";
    case 510: return "Not Extended";
    case 511: return "Network Authentication Required";
    default: return {};
  }
}

Framing response_framing(const ResponseParser& p, bool head_request) {
  auto status = p.get().result_int();
  if (head_request || status == 204 || status == 304 || (status >= 100 && status < 200))
    return Framing::none;
  if (p.chunked()) return Framing::chunked;
  if (p.content_length()) return *p.content_length() == 0 ? Framing::none : Framing::length;
  return Framing::until_close;
}

Framing downstream_framing(Framing upstream, unsigned client_version) {
  if (upstream == Framing::until_close && client_version >= 11) return Framing::chunked;
  if (upstream == Framing::chunked && client_version < 11) return Framing::until_close;
  return upstream;
}

void format_upstream_request(std::string& out, const UpstreamRequest& req, std::string_view host_if_missing) {
  out += req.method;
  out += ' ';
  out += req.target;
  out += " HTTP/1.1\r\n";
  struct Text final : FieldSink {
    std::string& out;
    bool host = false;
    explicit Text(std::string& o) : out(o) {}
    void field(std::string_view name, std::string_view value) override {
      host = host || (name.size() == 4 && iequals(name, "host"));
      append_field(out, name, value);
    }
  } text(out);
  req.fields(text);
  if (!text.host) append_field(out, "Host", absolute_form_authority(req.target).value_or(host_if_missing));
  append_framing(out, req.body);
  if (!req.upgrade.empty()) {
    out += "Connection: Upgrade\r\n";
    append_field(out, "Upgrade", req.upgrade);
  }
  out += "\r\n";
}

void format_downstream_response(std::string& out, const http::response_header<>& res,
                                Framing body, std::optional<std::uint64_t> content_length,
                                bool keep_alive, bool upgrade,
                                unsigned client_version) {
  append_status_line(out, res.result_int());
  const bool interim = res.result_int() < 200;
  bool dated = interim;  // a 1xx carries no Date (RFC 9110 §6.6.1 makes it optional; queue-proxy sends none)
  for (const auto& f : res) {
    // The forwarder removed the hop-by-hop fields (remove_hop_fields); the framing is this codec's own.
    if (f.name() == http::field::content_length || f.name() == http::field::upgrade) continue;
    dated = dated || f.name() == http::field::date;
    append_field(out, f.name_string(), f.value());
  }
  if (!dated) append_field(out, "Date", http_date_now());
  if (body == Framing::chunked) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (content_length && (body == Framing::length || body == Framing::none)) {
    out += "Content-Length: ";
    append_uint(out, *content_length);
    out += "\r\n";
  }
  if (upgrade) {
    out += "Connection: Upgrade\r\n";
    append_field(out, "Upgrade", res[http::field::upgrade]);
  } else if (!keep_alive) {
    out += "Connection: close\r\n";
  } else if (client_version < 11) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
}

void format_local_response(std::string& out, unsigned status, std::string_view body, bool keep_alive,
                           std::string_view request_id, const LocalResponseExtras& extras) {
  const std::size_t length = body.size() + (extras.exact_body ? 0 : 1);
  append_status_line(out, status);
  if (length > 0) out += "Content-Type: text/plain; charset=utf-8\r\n";
  if (extras.nosniff) out += "X-Content-Type-Options: nosniff\r\n";
  out += "Content-Length: ";
  append_uint(out, length);
  out += "\r\n";
  append_field(out, "Date", http_date_now());
  if (!request_id.empty()) append_field(out, "X-Request-Id", request_id);
  if (!extras.extra_name.empty()) append_field(out, extras.extra_name, extras.extra_value);
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += body;
  if (!extras.exact_body) out += '\n';
}

}  // namespace sluice::proxy::h1
