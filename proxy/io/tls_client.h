// The client side of TLS for connections sluice makes itself (telemetry export, HTTPS readiness probes):
// a TlsSocket in client mode that trusts the system's CA roots (OpenSSL's default paths, so SSL_CERT_FILE /
// SSL_CERT_DIR work as for any OpenSSL program), checks the peer's certificate against the host name (or
// IP address) it was asked to reach, sends SNI for a name, and offers one ALPN protocol (or none). As the OpenTelemetry Go exporters of queue-proxy do with an https:// endpoint.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "proxy/io/asio.h"
#include "proxy/io/tls_socket.h"

namespace sluice::proxy {

struct TlsClientConnection {
  std::unique_ptr<TlsSocket> stream;  // null when the handshake failed
  error_code code;                    // why not (asio::error::timed_out past the deadline)
  std::string error;  // the same for a log line, e.g. "certificate verify failed: hostname mismatch"
};

// Completes a client handshake over `socket` (connected, on the caller's executor) with `host` (a DNS
// name or an IP address literal, as the peer's certificate must name it), offering `alpn` ("h2",
// "http/1.1"; empty: no ALPN), by `deadline`. The socket is closed when the handshake fails.
asio::awaitable<TlsClientConnection> tls_client_handshake(tcp::socket socket, std::string host,
                                                          std::string_view alpn, Clock::time_point deadline);

// The protocol the server chose by ALPN, "" when none.
std::string_view negotiated_alpn(TlsSocket& stream);

}  // namespace sluice::proxy
