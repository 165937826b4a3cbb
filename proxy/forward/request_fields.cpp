// Request header policy; see request_fields.h.
#include "proxy/forward/request_fields.h"

#include <iterator>

#include <boost/range/iterator_range.hpp>

#include "proxy/io/field_value.h"

namespace sluice::proxy {
namespace {

// Connection tokens other than the ones every peer sends name extra hop-by-hop fields.
bool names_fields(std::string_view v) {
  return !(v.empty() || iequals(v, "keep-alive") || iequals(v, "close") || iequals(v, "upgrade"));
}

}  // namespace

bool stops_at_this_hop(std::string_view connection_value, http::field f, std::string_view name) {
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
      return names_fields(connection_value) && listed_in_connection(connection_value, name);
  }
}

void rewrite_request_fields(const http::request_header<>& req, const RequestRewrite& rw,
                            std::string& request_id, std::string& trace_id, FieldSink& out) {
  const auto connection = field_value(req, http::field::connection);
  // This thread's scratch, reused: the sink copies what it is given, and a hop's Forwarded value is
  // longer than a string holds without allocating.
  thread_local std::string xff, forwarded;
  xff.clear();
  forwarded.clear();
  std::string_view xfp, xfh;
  bool te_trailers = false, client_id = false;
  // The activator moves the original Host aside; queue-proxy puts it back for the app. Else an absolute-form
  // target's host is the request's host, whatever Host says (RFC 9112 §3.2.2, as queue-proxy's net/http).
  std::string_view host = field_value(req, kOriginalHostHeader);
  if (host.empty() && absolute_form_target(req.target())) host = target_authority(req.target());
  for (const auto& f : req) {
    auto name = f.name_string();
    auto value = f.value();
    auto id = f.name();
    if (id == http::field::host && !host.empty()) value = host;
    if (id == http::field::te) {
      te_trailers = te_trailers || listed_in_connection(value, "trailers");
      continue;
    }
    if (id == http::field::expect) continue;  // sluice answers 100-continue itself
    if (id == http::field::http2_settings) continue;  // h2c upgrade offers are declined on HTTP/1.1
    if (stops_at_this_hop(connection, id, name)) continue;
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
      if (iequals(name, kOriginalHostHeader) || is_activator_revision_header(name)) continue;
      if (iequals(name, "x-forwarded-proto")) {
        xfp = value;
      } else if (iequals(name, "x-forwarded-host")) {
        xfh = value;
      } else if (iequals(name, "x-request-id")) {
        request_id.assign(value.data(), value.size());
        client_id = true;
      } else if (iequals(name, "x-b3-traceid")) {
        trace_id.assign(value.data(), value.size());
      }
    }
    out.field(name, value);
  }

  // RFC 7239 first (queue-proxy's shim reads the X-Forwarded-* the client sent), then this hop.
  if (forwarded.empty()) forwarded = forwarded_from_x_forwarded(xff, xfh, xfp);
  if (rw.hop_in_forwarded) append_forwarded_hop(forwarded, rw.peer_address, rw.scheme);
  append_x_forwarded_for(xff, rw.peer_address);
  out.field("X-Forwarded-For", xff);
  if (!forwarded.empty()) out.field("Forwarded", forwarded);
  if (xfp.empty() && rw.hop_in_forwarded) out.field("X-Forwarded-Proto", rw.scheme);
  if (!client_id) {
    if (request_id.empty() && rw.request_ids) rw.request_ids->next_into(request_id);
    if (!request_id.empty()) out.field("X-Request-Id", request_id);
  }
  if (te_trailers) out.field("TE", "trailers");
}

void remove_hop_fields(http::response_header<>& res, bool upgrading) {
  // Connection's value is read in place, so the Connection fields themselves go last. An app that sent
  // Connection more than once names fields in each (RFC 9110 §5.3: one list).
  std::string_view connection = field_value(res, http::field::connection);
  std::string joined;
  if (!connection.empty() && res.count(http::field::connection) > 1) {
    for (const auto& f : boost::make_iterator_range(res.equal_range(http::field::connection))) {
      if (!joined.empty()) joined += ", ";
      joined += f.value();
    }
    connection = joined;
  }
  const bool switching = upgrading && res.result_int() == 101;
  for (auto it = res.begin(); it != res.end();) {
    const auto id = it->name();
    const bool stays = id == http::field::connection || id == http::field::content_length ||
                       (switching && id == http::field::upgrade) ||
                       !stops_at_this_hop(connection, id, it->name_string());
    it = stays ? std::next(it) : res.erase(it);
  }
  res.erase(http::field::connection);
}

ForwardedRequest::ForwardedRequest(const http::request_header<>& req, const RequestRewrite& rw, BodyInfo body_info,
                                   ExchangeRecord& record, bool upgrading)
    : req_(req), rw_(rw), record_(record) {
  method = req.method_string();
  target = req.target();
  if (absolute_form_target(target)) {
    const auto start = target.find("://") + 3, rest = target.find_first_of("/?", start);
    authority_ = target.substr(start, rest == std::string_view::npos ? std::string_view::npos : rest - start);
    if (const auto at = authority_.rfind('@'); at != std::string_view::npos) authority_.remove_prefix(at + 1);
    if (rest != std::string_view::npos && target[rest] == '/') {
      target = target.substr(rest);
    } else {
      origin_ = "/";
      if (rest != std::string_view::npos) origin_ += target.substr(rest);
      target = origin_;
    }
  }
  body = body_info;
  if (upgrading) upgrade = field_value(req, http::field::upgrade);
}

void ForwardedRequest::fields(FieldSink& out) const {
  record_.trace_id.clear();
  rewrite_request_fields(req_, rw_, record_.request_id, record_.trace_id, out);
  if (!authority_.empty() && req_.find(http::field::host) == req_.end()) out.field("Host", authority_);
}

}  // namespace sluice::proxy
