// Header policy on the request path: hop-by-hop removal, Forwarded / X-Forwarded-*, request ids.
// Pure functions over strings so they are unit-tested without sockets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/ascii.h"

namespace sluice::proxy {

// RFC 7230 §6.1 connection-specific fields, plus Proxy-Connection and Keep-Alive that older peers use.
// `Upgrade` is handled by the caller (kept on upgrade requests).
bool is_hop_by_hop(std::string_view name);

// True when `name` is listed in a Connection header value (comma-separated tokens, any case).
bool listed_in_connection(std::string_view connection_value, std::string_view name);

// Formats an address as an RFC 7239 node: IPv4 and names as they are, IPv6 quoted and bracketed
// (`"[::1]"`). Like queue-proxy, anything containing ':' is taken for IPv6.
std::string forwarded_node(std::string_view address);

// queue-proxy's shim: a Forwarded value synthesized from X-Forwarded-For/-Host/-Proto, or "" when all
// three are empty. The first element carries for, host and proto; each further XFF node is its own element.
std::string forwarded_from_x_forwarded(std::string_view xff, std::string_view xfh, std::string_view xfp);

// Appends this hop's element `for=<peer>;proto=<proto>` to a Forwarded value (which may be empty).
void append_forwarded_hop(std::string& forwarded, std::string_view peer, std::string_view proto);

// Appends `peer` to an X-Forwarded-For value (which may be empty): "a, b" + c -> "a, b, c".
void append_x_forwarded_for(std::string& xff, std::string_view peer);

// K-Original-Host: the Host the activator replaced; restored before the request reaches the app.
inline constexpr std::string_view kOriginalHostHeader = "K-Original-Host";

// Knative-Serving-Revision and Knative-Serving-Namespace, which the activator adds for itself; removed
// before the app sees the request, as queue-proxy removes them. Other Knative-Serving-* fields (the
// route's Knative-Serving-Tag, Knative-Serving-Default-Route) reach the app through queue-proxy, and so
// through sluice.
bool is_activator_revision_header(std::string_view name);
// The route's tag, and whether the request came by the default route (its metrics' kn_route_tag).
inline constexpr std::string_view kRouteTagHeader = "Knative-Serving-Tag";
inline constexpr std::string_view kDefaultRouteHeader = "Knative-Serving-Default-Route";

// Now as an HTTP-date (RFC 9110 §5.6.7, "Sun, 06 Nov 1994 08:49:37 GMT"), formatted once a second per
// thread. Every response gets a Date when the app gave none, as from Go's server (queue-proxy) or nginx.
std::string_view http_date_now();

// A random UUID v4 for X-Request-Id, from a fast per-thread generator.
class RequestIdGenerator {
 public:
  RequestIdGenerator();
  explicit RequestIdGenerator(std::uint64_t seed) : state_(seed) {}
  std::string next();
  // The next id into `out`, reusing its capacity.
  void next_into(std::string& out);

 private:
  std::uint64_t next64();
  std::uint64_t state_;
};

}  // namespace sluice::proxy
