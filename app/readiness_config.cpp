// SERVING_READINESS_PROBE; see readiness_config.h. Kubernetes' probe JSON, as Knative encodes it.
#include "app/readiness_config.h"

#include <optional>
#include <string>

#include <boost/asio/ip/address.hpp>
#include <boost/json.hpp>

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

// One Kubernetes probe. nullopt: an exec probe, which only the kubelet can run.
std::optional<proxy::ReadinessProbeConfig> parse_one(const boost::json::value& v, std::uint16_t user_port,
                                                     bool multi) {
  proxy::ReadinessProbeConfig c;
  c.port = user_port;
  if (!v.is_object()) bad_probe("expected a JSON object (a Kubernetes probe)");
  const auto& o = v.as_object();
  c.timeout = proxy::Millis(1000 * probe_int(o, "timeoutSeconds", 1));
  if (c.timeout.count() == 0) c.timeout = proxy::Millis(1000);
  c.period = proxy::Millis(1000 * probe_int(o, "periodSeconds", 0));
  (void)probe_int(o, "successThreshold", 1);  // validated; the kubelet counts successes, not sluice
  (void)probe_int(o, "failureThreshold", 3);
  auto host = [&](const boost::json::object& h) {
    if (auto* p = h.if_contains("host"); p && p->is_string() && !p->as_string().empty()) {
      c.host = std::string(p->as_string());
      boost::system::error_code aec;
      boost::asio::ip::make_address(c.host, aec);
      if (aec) bad_probe("host \"" + c.host + "\" is not an IP address");
    }
  };
  if (auto* t = o.if_contains("tcpSocket")) {
    if (!t->is_object()) bad_probe("tcpSocket must be an object");
    c.kind = proxy::ReadinessProbeConfig::Kind::tcp_connect;
    host(t->as_object());
    c.port = probe_port(t->as_object(), user_port);
    return c;
  }
  if (auto* h = o.if_contains("httpGet")) {
    if (!h->is_object()) bad_probe("httpGet must be an object");
    const auto& g = h->as_object();
    c.kind = proxy::ReadinessProbeConfig::Kind::http_get;
    host(g);
    c.port = probe_port(g, user_port);
    if (auto* p = g.if_contains("path"); p && p->is_string() && !p->as_string().empty())
      c.path = std::string(p->as_string());
    if (c.path.front() != '/') c.path.insert(0, "/");
    if (auto* p = g.if_contains("scheme"); p && p->is_string() && p->as_string() == "HTTPS") {
      log::warn("SERVING_READINESS_PROBE: HTTPS probes are checked by TCP connect for now");
      c.kind = proxy::ReadinessProbeConfig::Kind::tcp_connect;
    }
    if (auto* p = g.if_contains("httpHeaders")) {
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
  if (multi && o.contains("exec")) return std::nullopt;
  if (auto* g = o.if_contains("grpc"); multi && g && g->is_object()) {
    // A sidecar's gRPC health check needs a gRPC client the sidecar does not carry: its port is checked.
    log::warn("SERVING_READINESS_PROBE: a gRPC probe is checked by TCP connect to its port");
    c.kind = proxy::ReadinessProbeConfig::Kind::tcp_connect;
    c.port = probe_port(g->as_object(), user_port);
    return c;
  }
  if (o.contains("grpc") || o.contains("exec"))
    bad_probe("only tcpSocket and httpGet probes can be checked by the sidecar");
  bad_probe("expected tcpSocket or httpGet");
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
  if (v.is_array()) {  // one probe per container, without ENABLE_MULTI_CONTAINER_PROBES: the app's
    if (v.as_array().empty()) return c;
    v = boost::json::value(v.as_array().front());
  }
  return *parse_one(v, user_port, false);
}

std::vector<proxy::ReadinessProbeConfig> parse_readiness_probes(std::string_view json, std::uint16_t user_port,
                                                                bool multi) {
  if (!multi || blank(json)) return {parse_readiness_probe(json, user_port)};
  auto v = parse_json(json);
  if (!v.is_array()) return {parse_readiness_probe(json, user_port)};  // a single probe is an array of one
  std::vector<proxy::ReadinessProbeConfig> probes;
  std::size_t exec = 0;
  for (const auto& e : v.as_array()) {
    if (auto p = parse_one(e, user_port, true)) probes.push_back(std::move(*p));
    else ++exec;
  }
  if (exec > 0)
    log::warn("SERVING_READINESS_PROBE: exec probes are run by the kubelet, not by the sidecar; left out")
        .kv("exec_probes", static_cast<unsigned>(exec));
  if (probes.empty()) probes.push_back(parse_readiness_probe("", user_port));
  return probes;
}

}  // namespace sluice::app
