// SERVING_READINESS_PROBE; see readiness_config.h. Kubernetes' probe JSON, as Knative encodes it.
#include "app/sidecar/readiness_config.h"

#include <string>

#include <boost/asio/ip/address.hpp>
#include <boost/json.hpp>

#include "common/ascii.h"
#include "common/config_error.h"
#include "common/log.h"

namespace sluice::app {
namespace {

[[noreturn]] void bad_probe(std::string_view what) {
  throw ConfigError("SERVING_READINESS_PROBE: " + std::string(what));
}

std::int64_t probe_int(const boost::json::object& o, const char* key, std::int64_t fallback) {
  auto* p = o.if_contains(key);
  if (!p) return fallback;
  // Kubernetes declares these fields int32; a larger count of seconds would overflow as milliseconds.
  constexpr std::int64_t kMax = 2147483647;
  if (p->is_int64() && p->as_int64() >= 0 && p->as_int64() <= kMax) return p->as_int64();
  if (p->is_uint64() || (p->is_int64() && p->as_int64() > kMax))
    bad_probe(std::string(key) + " must be at most 2147483647");
  bad_probe(std::string(key) + " must be a non-negative integer");
}

std::uint16_t probe_port(const boost::json::object& handler, std::uint16_t user_port) {
  auto* p = handler.if_contains("port");
  if (!p) return user_port;
  std::int64_t port = -1;
  if (p->is_int64()) port = p->as_int64();
  if (p->is_string()) {  // IntOrString: queue-proxy receives numbers, but a numeric string is fine too
    const auto& str = p->as_string();
    if (!str.empty() && str.find_first_not_of("0123456789") == boost::json::string::npos && str.size() < 6)
      port = std::stoll(std::string(str));
    else
      bad_probe("named port \"" + std::string(str) + "\" cannot be resolved by the sidecar; use a number");
  }
  if (port == 0) return user_port;
  if (port < 1 || port > 65535) bad_probe("port must be a number from 1 to 65535");
  return static_cast<std::uint16_t>(port);
}

// A JSON member that Go's decoder would leave as a nil pointer: absent or null.
const boost::json::value* member(const boost::json::object& o, const char* key) {
  auto* p = o.if_contains(key);
  return p && !p->is_null() ? p : nullptr;
}

// One Kubernetes probe, its action chosen in queue-proxy's order (httpGet, tcpSocket, grpc, exec). Fields
// the sidecar has no use for (initialDelaySeconds, terminationGracePeriodSeconds, keys Kubernetes adds
// later) are left alone, as Go's decoder leaves unknown keys.
proxy::ReadinessProbeConfig parse_one(const boost::json::value& v, std::uint16_t user_port) {
  proxy::ReadinessProbeConfig c;
  c.port = user_port;
  if (v.is_null()) {
    c.kind = proxy::ReadinessProbeConfig::Kind::never_passes;
    log::warn("SERVING_READINESS_PROBE: a null probe never passes");
    return c;
  }
  if (!v.is_object()) bad_probe("expected a JSON object (a Kubernetes probe)");
  const auto& o = v.as_object();
  c.timeout = proxy::Millis(1000 * probe_int(o, "timeoutSeconds", 1));
  if (c.timeout.count() == 0) c.timeout = proxy::Millis(1000);
  c.period = proxy::Millis(1000 * probe_int(o, "periodSeconds", 0));
  c.success_threshold = static_cast<std::int32_t>(probe_int(o, "successThreshold", 1));
  (void)probe_int(o, "failureThreshold", 3);  // validated; the kubelet counts failures, not sluice
  auto host = [&](const boost::json::object& h) {
    if (auto* p = h.if_contains("host"); p && p->is_string() && !p->as_string().empty()) {
      c.host = std::string(p->as_string());
      boost::system::error_code aec;
      boost::asio::ip::make_address(c.host, aec);
      if (aec) bad_probe("host \"" + c.host + "\" is not an IP address");
    }
  };
  if (auto* h = member(o, "httpGet")) {
    if (!h->is_object()) bad_probe("httpGet must be an object");
    const auto& g = h->as_object();
    c.kind = proxy::ReadinessProbeConfig::Kind::http_get;
    host(g);
    c.port = probe_port(g, user_port);
    if (auto* p = g.if_contains("path"); p && p->is_string() && !p->as_string().empty())
      c.path = std::string(p->as_string());
    if (c.path.front() != '/') c.path.insert(0, "/");
    if (auto* p = member(g, "scheme")) {
      if (!p->is_string()) bad_probe("httpGet.scheme must be a string");
      // Go lower-cases a URL's scheme; Knative writes HTTP when the user gave none.
      const auto& scheme = p->as_string();
      if (iequals(scheme, "HTTPS")) {
        c.https = true;
      } else if (!scheme.empty() && !iequals(scheme, "HTTP")) {
        c.kind = proxy::ReadinessProbeConfig::Kind::never_passes;  // Go: unsupported protocol scheme
        log::warn("SERVING_READINESS_PROBE: an httpGet probe with this scheme never passes")
            .kv("scheme", std::string_view(scheme));
      }
    }
    if (auto* p = member(g, "httpHeaders")) {
      if (!p->is_array()) bad_probe("httpGet.httpHeaders must be an array");
      for (const auto& e : p->as_array()) {
        const auto* name = e.is_object() ? e.as_object().if_contains("name") : nullptr;
        const auto* value = e.is_object() ? e.as_object().if_contains("value") : nullptr;
        if (!name || !name->is_string() || !value || !value->is_string())
          bad_probe("each httpGet.httpHeaders entry needs a string name and value");
        c.headers.emplace_back(std::string(name->as_string()), std::string(value->as_string()));
      }
    }
    return c;
  }
  if (auto* t = member(o, "tcpSocket")) {
    if (!t->is_object()) bad_probe("tcpSocket must be an object");
    c.kind = proxy::ReadinessProbeConfig::Kind::tcp_connect;
    host(t->as_object());
    c.port = probe_port(t->as_object(), user_port);
    return c;
  }
  if (auto* g = member(o, "grpc")) {
    if (!g->is_object()) bad_probe("grpc must be an object");
    const auto& a = g->as_object();
    c.kind = proxy::ReadinessProbeConfig::Kind::grpc_health;  // always to 127.0.0.1, as queue-proxy dials
    c.port = probe_port(a, user_port);
    if (auto* p = member(a, "service")) {
      if (!p->is_string()) bad_probe("grpc.service must be a string");
      c.grpc_service = std::string(p->as_string());
    }
    return c;
  }
  // queue-proxy starts with these and fails every health check: "exec probe not supported" (Knative turns a
  // container's exec probe into a TCP probe before it gets here) or "no probe found".
  c.kind = proxy::ReadinessProbeConfig::Kind::never_passes;
  log::warn(member(o, "exec") ? "SERVING_READINESS_PROBE: exec probes are not supported by the sidecar; "
                                "this probe never passes (as queue-proxy)"
                              : "SERVING_READINESS_PROBE: a probe with no action never passes (as queue-proxy)");
  return c;
}

bool blank(std::string_view json) { return json.find_first_not_of(" \t\r\n") == std::string_view::npos; }

boost::json::value parse_json(std::string_view json) {
  boost::system::error_code ec;
  auto v = boost::json::parse(json, ec);
  if (ec) bad_probe("not JSON (" + ec.message() + ")");
  return v;
}

}  // namespace

proxy::ReadinessProbeConfig parse_readiness_probe(std::string_view json, std::uint16_t user_port) {
  proxy::ReadinessProbeConfig c;
  c.port = user_port;
  if (blank(json)) return c;
  auto v = parse_json(json);
  // queue-proxy decodes it into one Probe: an array is an error there (ENABLE_MULTI_CONTAINER_PROBES
  // takes arrays).
  if (v.is_array()) bad_probe("an array needs ENABLE_MULTI_CONTAINER_PROBES=true (expected one probe object)");
  return parse_one(v, user_port);
}

std::vector<proxy::ReadinessProbeConfig> parse_readiness_probes(std::string_view json, std::uint16_t user_port,
                                                                bool multi) {
  if (!multi || blank(json)) return {parse_readiness_probe(json, user_port)};
  auto v = parse_json(json);
  if (!v.is_array()) bad_probe("with ENABLE_MULTI_CONTAINER_PROBES=true, expected an array of probes");
  std::vector<proxy::ReadinessProbeConfig> probes;
  for (const auto& e : v.as_array()) probes.push_back(parse_one(e, user_port));
  if (probes.empty()) probes.push_back(parse_readiness_probe("", user_port));
  return probes;
}

}  // namespace sluice::app
