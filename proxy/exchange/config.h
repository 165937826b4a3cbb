// Configuration of the data plane: a plain struct, filled and validated once in app/, read-only afterwards.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/netns.h"
#include "proxy/exchange/h2_limits.h"

namespace sluice::proxy {

class RequestLogTemplate;

using Seconds = std::chrono::seconds;
using Millis = std::chrono::milliseconds;

struct Limits {
  std::size_t max_header_bytes = 64 * 1024;  // request line + headers (431 beyond)
  std::size_t max_header_count = 100;        // fields per request (431 beyond); 0 = no limit
  std::size_t max_target_bytes = 8192;       // request target (414 beyond)
  std::uint64_t max_body_bytes = 0;          // 0 = unlimited (413 beyond)
  std::size_t max_connections = 10000;       // per process; further accepts are closed at once
  std::size_t max_response_header_bytes = 64 * 1024;  // from the app (502 beyond)
  h2::AbuseLimits h2;  // what one HTTP/2 client connection may do before GOAWAY
  // A connection that ends with the client's bytes unread (after an error answer, or a GOAWAY) reads and
  // drops them this long and this much at most before closing (listen/linger.h); 0 ms = close at once.
  std::chrono::milliseconds linger{2000};
  std::size_t linger_bytes = 8 * 1024 * 1024;
};

struct Timeouts {
  Millis request{Seconds(300)};       // whole exchange (REVISION_TIMEOUT_SECONDS); 0 = none
  Millis response_start{0};           // until the first response byte; 0 = none
  Millis idle{0};                     // since the last byte written to the client; 0 = none
  Millis client_header{Seconds(60)};  // waiting for a complete request header (keep-alive idle too)
  Millis upstream_connect{Seconds(5)};
  // A new connection to a gateway instance (on this machine: a loopback or pod-link round trip takes
  // microseconds) is connected, and the request it carries acknowledged by the instance's kernel, within
  // this long, or the instance's listen queue is full: the connect's SYN, or the handshake's last ACK
  // and the request after it, were dropped, and the kernel's retries back off to a minute. The request,
  // which has reached nothing, goes again on a new connection, until its deadline.
  Millis instance_accept{250};
  // An app connection idle in the pool this long is closed (Go's http.Transport, which queue-proxy
  // uses, closes them after 90 s; nginx's upstream keepalive_timeout is 60 s); 0 = kept until used.
  Millis upstream_idle{Seconds(90)};
  Millis drain_quiet_period{Seconds(30)};  // draining ends this long after the last ordinary request
  // At shutdown, a keep-alive connection between requests stays open until this long after its last
  // answer (or its accept), for a request already on its way, served with Connection: close. A client
  // under load sends its next request at once, but a busy machine can hold it back for a good part of a
  // second; a connection idle longer than this is closed at once, as Go and nginx close idle ones.
  Millis drain_idle_close{Seconds(1)};
  // At shutdown, new connection attempts are turned away at once (net::refuse_new_handshakes) but the
  // listeners stay open this long, for the handshakes already under way to complete and be served with
  // Connection: close: closing a listener resets what is in its accept queue. A loopback or in-cluster
  // handshake takes well under a millisecond.
  Millis drain_handshakes{100};
};

// SERVING_READINESS_PROBE: how the user container's readiness is checked for health checks.
struct ReadinessProbeConfig {
  // never_passes: an exec probe, or one with no action; queue-proxy runs it and fails it at once, every time.
  enum class Kind { tcp_connect, http_get, grpc_health, never_passes };
  Kind kind = Kind::tcp_connect;
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string path = "/";
  bool https = false;  // http_get over TLS, the certificate verified as queue-proxy's Go client does
  std::vector<std::pair<std::string, std::string>> headers;
  std::string grpc_service;  // grpc_health: the service asked about ("": the server as a whole)
  Millis timeout{Seconds(1)};  // per try, when period > 0
  Millis period{0};            // 0: poll aggressively (50 ms) for up to 10 s, as Knative's default
  // When polling aggressively: consecutive successes needed, counted across health checks and reset by
  // a failure (queue-proxy's wrappedProbe.count).
  std::int32_t success_threshold = 1;
  net::Netns netns;  // where the app is: the pod's network namespace when sluice runs outside it
};

enum class TlsVersion { v1_2, v1_3 };

// The TLS port (QUEUE_SERVING_TLS_PORT): off unless a certificate is configured.
struct TlsConfig {
  std::string cert_file;  // PEM chain, leaf first
  std::string key_file;   // PEM private key
  TlsVersion min_version = TlsVersion::v1_3;  // queue-proxy's default (QUEUE_PROXY_TLS_MIN_VERSION)
  TlsVersion max_version = TlsVersion::v1_3;
  std::string tls12_ciphers;  // OpenSSL cipher list for TLS 1.2; empty: forward-secret AEAD suites
  std::string groups;         // OpenSSL groups list (key exchange curves); empty: X25519, P-256, P-384, P-521 (Go's)
  Millis reload_interval{Seconds(10)};  // how often the files are checked for a change; 0 = never
};

// .Revision in request-log templates: who this sidecar serves.
struct RevisionInfo {
  std::string name, namespace_name, service, configuration, pod_name, pod_ip;
};

struct ProxyConfig {
  // The pod's network namespace (SLUICE_NETNS) when sluice runs outside it: the listeners and every
  // connection to the app are made inside (common/netns.h). Default: sluice's own.
  net::Netns netns;
  std::string listen_address = "0.0.0.0";  // "::" listens dual-stack
  std::uint16_t port = 8012;                // 0 = ephemeral (logged)
  std::string upstream_host = "127.0.0.1";
  std::uint16_t upstream_port = 8080;
  unsigned workers = 0;                      // 0 = one per CPU it may use (common/cpu_budget.h)
  std::size_t upstream_max_idle = 1000;      // idle keep-alive connections kept per worker
  std::size_t io_buffer_bytes = 64 * 1024;   // body relay buffer per direction per exchange; the worker's read buffer (ServerContext::read_buffer)
  // A body with at least this many bytes still to come, passing through unchanged (HTTP/1.1 without
  // TLS, Content-Length), moves socket to socket in the kernel (splice.h); 0 = never, copy every body.
  std::size_t splice_min_bytes = 16 * 1024;
  // Responses too (request bodies only by default). A spliced response reaches a client on the same host
  // (loopback, a veth) as segments of page fragments its socket handles slower: 1 MiB downloads at
  // wrk -c50 ran at 0.5-0.8x the copied rate, the client's CPU per request up by more than sluice's went
  // down (bench/README.md, 2026-11-28). A client across a NIC gets fresh segments either way.
  bool splice_responses = false;
  Limits limits;
  Timeouts timeouts;
  // What the plain port speaks: both (HTTP/1.1, h2c by prior knowledge and by Upgrade), or one only.
  enum class PlainProtocols { http1_and_h2c, http1, h2c };
  PlainProtocols plain_protocols = PlainProtocols::http1_and_h2c;
  // What the app speaks: HTTP/1.1, h2c (prior knowledge), or whichever answers the HTTP/2 preface
  // (ENABLE_HTTP2_AUTO_DETECTION; asked once per worker, at the first exchange). Any downstream
  // protocol is translated to it.
  enum class UpstreamProtocol { http1, h2c, detect };
  UpstreamProtocol upstream_protocol = UpstreamProtocol::http1;
  // The forwarding fields the app gets: queue-proxy's (X-Forwarded-For with the peer appended;
  // Forwarded only when synthesized from the client's X-Forwarded-*), or those and this hop in Forwarded,
  // X-Forwarded-Proto and an X-Request-Id made when the client sent none.
  enum class ForwardingFields { queue_proxy, full };
  ForwardingFields forwarding_fields = ForwardingFields::full;
  std::size_t container_concurrency = 0;  // 0 = no breaker
  std::size_t queue_depth = 0;            // waiting requests beyond the concurrency (Knative: 10x)
  ReadinessProbeConfig readiness;  // the app's
  // ENABLE_MULTI_CONTAINER_PROBES: the other containers' probes; ready only when every one passes too.
  std::vector<ReadinessProbeConfig> sidecar_readiness;
  bool request_log = false;
  bool probe_request_log = false;  // SERVING_ENABLE_PROBE_REQUEST_LOG
  std::string pod_ip;  // serverIp in the request log
  // SERVING_REQUEST_LOG_TEMPLATE / requestLogTemplate; null: Knative's default template's JSON shape.
  std::shared_ptr<const RequestLogTemplate> request_log_template;
  RevisionInfo revision;
  std::optional<TlsConfig> tls;  // with it, a second listener on tls_port terminates TLS
  std::uint16_t tls_port = 8112;
};

}  // namespace sluice::proxy
