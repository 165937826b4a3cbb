// Client-side TLS; see tls_client.h.
#include "proxy/io/tls_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sluice::proxy {
namespace {

// One context for every client connection of the process, made on first use: the CA roots are read
// once (a bundle of a few hundred certificates), as Go reads the system pool once.
asio::ssl::context& client_context() {
  static asio::ssl::context context = [] {
    asio::ssl::context c(asio::ssl::context::tls_client);
    auto* h = c.native_handle();
    SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);  // crypto/tls's client default
    SSL_CTX_set_options(h, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    // SSL_CERT_FILE / SSL_CERT_DIR, else the distribution's bundle. Missing paths leave an empty store,
    // and every handshake then fails verification, which is logged where it happens.
    SSL_CTX_set_default_verify_paths(h);
    SSL_CTX_set_verify(h, SSL_VERIFY_PEER, nullptr);
    return c;
  }();
  return context;
}

// The name the certificate must carry, SNI and ALPN; "" when OpenSSL took them, else why not.
std::string expect_peer(SSL* ssl, const std::string& host, std::string_view alpn) {
  error_code not_ip;
  (void)asio::ip::make_address(host, not_ip);
  if (!not_ip) {
    // An address is matched against the certificate's IP entries, and is never sent as SNI (RFC 6066 §3).
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1) return "bad IP address " + host;
  } else {
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set1_host(ssl, host.c_str()) != 1) return "bad host name " + host;
    if (SSL_set_tlsext_host_name(ssl, const_cast<char*>(host.c_str())) != 1) return "bad SNI name " + host;
  }
  if (!alpn.empty()) {
    std::string wire(1, static_cast<char>(alpn.size()));
    wire.append(alpn);
    // 0 is success here, unlike the rest of OpenSSL.
    if (SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>(wire.data()),
                            static_cast<unsigned>(wire.size())) != 0)
      return "bad ALPN protocol " + std::string(alpn);
  }
  return {};
}

// A failed handshake in words: the verification result when the peer's certificate was refused (which
// OpenSSL's error queue only calls "certificate verify failed"), else the error.
std::string describe(SSL* ssl, const error_code& ec) {
  if (const long verdict = SSL_get_verify_result(ssl); verdict != X509_V_OK)
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verdict);
  if (ec == asio::error::eof) return "the server closed the connection during the handshake";
  return ec.message();
}

}  // namespace

asio::awaitable<TlsClientConnection> tls_client_handshake(tcp::socket socket, std::string host,
                                                          std::string_view alpn, Clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  TlsClientConnection out;
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto stream = std::make_unique<TlsSocket>(std::move(socket), client_context(), asio::ssl::stream_base::client);
  if (auto bad = expect_peer(stream->native_handle(), host, alpn); !bad.empty()) {
    ERR_clear_error();
    out.code = asio::error::invalid_argument;
    out.error = "TLS to " + host + ": " + bad;
    stream->next_layer().close(ignored);
    co_return out;
  }
  asio::steady_timer limit(stream->get_executor(), deadline);
  auto done = co_await (stream->async_handshake(asio::ssl::stream_base::client, use_nothrow) ||
                        limit.async_wait(use_nothrow));
  if (done.index() == 1) {
    out.code = asio::error::timed_out;
    out.error = "TLS handshake with " + host + " timed out";
  } else if (auto ec = std::get<0>(std::get<0>(done))) {
    out.code = ec;
    out.error = "TLS handshake with " + host + ": " + describe(stream->native_handle(), ec);
  }
  ERR_clear_error();
  if (out.code) {
    stream->next_layer().close(ignored);
    co_return out;
  }
  out.stream = std::move(stream);
  co_return out;
}

std::string_view negotiated_alpn(TlsSocket& stream) {
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(stream.native_handle(), &p, &n);
  return p ? std::string_view(reinterpret_cast<const char*>(p), n) : std::string_view();
}

}  // namespace sluice::proxy
