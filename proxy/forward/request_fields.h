// The forwarder's header policy for a request on its way to the app, whatever protocol carries it:
// hop-by-hop and Knative-internal fields removed, K-Original-Host restored, this hop added to Forwarded
// and X-Forwarded-*, an X-Request-Id made when the client sent none, `TE: trailers` kept.
#pragma once

#include <string>
#include <string_view>

#include "proxy/exchange/exchange.h"
#include "proxy/exchange/headers.h"

namespace sluice::proxy {

struct RequestRewrite {
  std::string_view peer_address;              // client IP, for X-Forwarded-For and Forwarded
  std::string_view scheme;                    // "http" or "https"
  RequestIdGenerator* request_ids = nullptr;  // makes an X-Request-Id when the client sent none
  // This hop in Forwarded and X-Forwarded-Proto too. Without it, as queue-proxy: X-Forwarded-For gets
  // the peer, and Forwarded is only synthesized from the X-Forwarded-* the client sent.
  bool hop_in_forwarded = true;
};

// Whether a field named in a message (request or response) stops at this hop: connection-specific,
// framing (the codecs write their own), proxy authentication, or listed in `connection_value`.
bool stops_at_this_hop(std::string_view connection_value, http::field f, std::string_view name);

// The end-to-end fields of `req`, then this hop's forwarding fields, X-Request-Id when the client sent
// none, and `TE: trailers` when asked for. Framing fields (Content-Length, Transfer-Encoding) are the
// codec's. `request_id` is the X-Request-Id sent: the client's, or the one made (kept across calls, so
// a retried request carries the same); `trace_id` the client's X-B3-TraceId.
void rewrite_request_fields(const http::request_header<>& req, const RequestRewrite& rw,
                            std::string& request_id, std::string& trace_id, FieldSink& out);

// This hop's policy for a response head on its way to the client, whatever protocol carries it either
// side (RFC 9110 §7.6.1): the connection-specific fields and the ones its Connection names are removed in
// place. Content-Length stays (HTTP/2 carries it; HTTP/1.1 writes its own framing), and so does the
// Upgrade of a 101 that answers a client's upgrade (`upgrading`), which the HTTP/1.1 codec passes on with
// its own `Connection: Upgrade`.
void remove_hop_fields(http::response_header<>& res, bool upgrading);

// A client's request as the forwarder sends it on.
// An absolute-form target (a client that took this hop for a forward proxy, as an HTTP client with
// http_proxy set does) goes on in origin-form, which an origin server expects (RFC 9112 §3.2.1; nginx and
// Go's ReverseProxy send it so), with its authority as Host when the request had none (HTTP/1.0).
class ForwardedRequest final : public UpstreamRequest {
 public:
  ForwardedRequest(const http::request_header<>& req, const RequestRewrite& rw, BodyInfo body_info,
                   ExchangeRecord& record, bool upgrading);
  ForwardedRequest(const ForwardedRequest&) = delete;  // `target` may view `origin_`
  ForwardedRequest& operator=(const ForwardedRequest&) = delete;
  void fields(FieldSink& out) const override;

 private:
  const http::request_header<>& req_;
  RequestRewrite rw_;
  ExchangeRecord& record_;
  std::string_view authority_;  // of an absolute-form target
  std::string origin_;          // its origin-form, when that is not a part of it ("http://h?q" → "/?q")
};

}  // namespace sluice::proxy
