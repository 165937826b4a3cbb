// HTTP/1.1 message heads; see message.h.
#include "proxy/h1/message.h"

#include <charconv>

#include "proxy/headers.h"

namespace sluice::proxy::h1 {
namespace {

void append_uint(std::string& out, std::uint64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  out.append(tmp, r.ptr);
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ": ";
  out += value;
  out += "\r\n";
}

// Connection tokens other than the ones every peer sends name extra hop-by-hop fields.
struct ConnectionTokens {
  std::string_view value;
  bool names_fields = false;
  explicit ConnectionTokens(std::string_view v) : value(v) {
    names_fields = !(v.empty() || iequals(v, "keep-alive") || iequals(v, "close") ||
                     iequals(v, "upgrade"));
  }
  bool lists(std::string_view name) const { return names_fields && listed_in_connection(value, name); }
};

bool skip_end_to_end(const ConnectionTokens& conn, http::field f, std::string_view name) {
  switch (f) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::transfer_encoding:
    case http::field::te:
    case http::field::upgrade:
    case http::field::content_length:
    case http::field::proxy_authenticate:
    case http::field::proxy_authorization:
      return true;
    default:
      return conn.lists(name);
  }
}

}  // namespace

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

void rewrite_request_fields(const http::request_header<>& req, const RequestRewrite& rw,
                            std::string& request_id, std::string& trace_id, FieldSink& out) {
  ConnectionTokens conn(req[http::field::connection]);
  std::string xff, forwarded;
  std::string_view xfp, xfh;
  bool te_trailers = false;
  // The activator moves the original Host aside; queue-proxy puts it back for the app.
  std::string_view original_host;
  if (auto it = req.find(kOriginalHostHeader); it != req.end()) original_host = it->value();
  for (const auto& f : req) {
    auto name = f.name_string();
    auto value = f.value();
    auto id = f.name();
    if (id == http::field::host && !original_host.empty()) value = original_host;
    if (id == http::field::te) {
      te_trailers = te_trailers || listed_in_connection(value, "trailers");
      continue;
    }
    if (id == http::field::expect) continue;  // sluice answers 100-continue itself
    if (id == http::field::http2_settings) continue;  // h2c upgrade offers are declined on HTTP/1.1
    if (skip_end_to_end(conn, id, name)) continue;
    if (id == http::field::forwarded) {
      if (!forwarded.empty()) forwarded += ", ";
      forwarded += value;
      continue;
    }
    if (id == http::field::unknown) {
      if (iequals(name, "x-forwarded-for")) {
        if (!xff.empty()) xff += ", ";
        xff += value;
        continue;
      }
      if (iequals(name, kOriginalHostHeader) || is_knative_revision_header(name)) continue;
      if (iequals(name, "x-forwarded-proto")) xfp = value;
      else if (iequals(name, "x-forwarded-host")) xfh = value;
      else if (iequals(name, "x-request-id")) request_id.assign(value.data(), value.size());
      else if (iequals(name, "x-b3-traceid")) trace_id.assign(value.data(), value.size());
    }
    out.field(name, value);
  }

  // RFC 7239 first (queue-proxy's shim reads the X-Forwarded-* the client sent), then this hop.
  if (forwarded.empty()) forwarded = forwarded_from_x_forwarded(xff, xfh, xfp);
  append_forwarded_hop(forwarded, rw.peer_address, rw.scheme);
  append_x_forwarded_for(xff, rw.peer_address);
  out.field("X-Forwarded-For", xff);
  out.field("Forwarded", forwarded);
  if (xfp.empty()) out.field("X-Forwarded-Proto", rw.scheme);
  if (request_id.empty() && rw.request_ids) {
    request_id = rw.request_ids->next();
    out.field("X-Request-Id", request_id);
  }
  if (te_trailers) out.field("TE", "trailers");
}

void format_upstream_request(std::string& out, const http::request_header<>& req, Framing body,
                             std::optional<std::uint64_t> content_length, const RequestRewrite& rw,
                             std::string& request_id, std::string& trace_id) {
  out += req.method_string();
  out += ' ';
  out += req.target();
  out += " HTTP/1.1\r\n";
  struct Text final : FieldSink {
    std::string& out;
    explicit Text(std::string& o) : out(o) {}
    void field(std::string_view name, std::string_view value) override { append_field(out, name, value); }
  } text(out);
  rewrite_request_fields(req, rw, request_id, trace_id, text);
  if (body == Framing::chunked) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (body == Framing::length && content_length) {
    out += "Content-Length: ";
    append_uint(out, *content_length);
    out += "\r\n";
  } else if (content_length) {
    out += "Content-Length: 0\r\n";  // keep an explicit zero: some apps insist on it for POST
  }
  if (rw.keep_upgrade) {
    out += "Connection: Upgrade\r\n";
    append_field(out, "Upgrade", req[http::field::upgrade]);
  }
  out += "\r\n";
}

void format_downstream_response(std::string& out, const http::response_header<>& res,
                                Framing body, std::optional<std::uint64_t> content_length,
                                bool keep_alive, bool upgrade,
                                unsigned client_version) {
  ConnectionTokens conn(res[http::field::connection]);
  out += "HTTP/1.1 ";
  append_uint(out, res.result_int());
  out += ' ';
  auto reason = res.reason();
  out += reason.empty() ? http::obsolete_reason(res.result()) : reason;
  out += "\r\n";
  for (const auto& f : res) {
    if (skip_end_to_end(conn, f.name(), f.name_string())) continue;
    append_field(out, f.name_string(), f.value());
  }
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
  out += "HTTP/1.1 ";
  append_uint(out, status);
  out += ' ';
  out += http::obsolete_reason(static_cast<http::status>(status));
  out += "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ";
  append_uint(out, length);
  out += "\r\n";
  if (!request_id.empty()) append_field(out, "X-Request-Id", request_id);
  if (!extras.extra_name.empty()) append_field(out, extras.extra_name, extras.extra_value);
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += body;
  if (!extras.exact_body) out += '\n';
}

}  // namespace sluice::proxy::h1
