// TLS termination; see tls.h.
#include "proxy/downstream/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>

#include "common/config_error.h"
#include "common/log.h"
#include "proxy/downstream/context.h"
#include "proxy/downstream/h1_connection.h"
#include "proxy/downstream/h2_server.h"

namespace sluice::proxy {
namespace {

// Mozilla's "intermediate" TLS 1.2 list: forward secrecy and AEAD only.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// What queue-proxy's crypto/tls offers when no QUEUE_PROXY_TLS_* says otherwise. TLS 1.3 suites: all
// three, AES-128-GCM first, ChaCha20 first for a client that lists it first (SSL_OP_PRIORITIZE_CHACHA,
// as Go does for clients without AES hardware). Groups: X25519 and the NIST curves, not OpenSSL's x448
// and finite-field groups (up to ffdhe8192, the costliest key exchange a client could ask for).
// Signature algorithms: Go's list, without SHA-1.
constexpr const char* kTls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* kGroups = "X25519:P-256:P-384:P-521";
constexpr const char* kSignatureAlgorithms =
    "rsa_pss_rsae_sha256:ecdsa_secp256r1_sha256:ed25519:rsa_pss_rsae_sha384:rsa_pss_rsae_sha512:"
    "rsa_pkcs1_sha256:rsa_pkcs1_sha384:rsa_pkcs1_sha512:ecdsa_secp384r1_sha384:ecdsa_secp521r1_sha512";

// ALPN: h2 when the client offers it, else http/1.1; a client offering neither goes on without ALPN.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
                void*) {
  static constexpr unsigned char kServer[] = "\x02h2\x08http/1.1";
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kServer, sizeof kServer - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

std::string openssl_reason(const error_code& ec) {
  std::string why = ec.message();
  if (auto e = ERR_get_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    why = buf;
  }
  ERR_clear_error();
  return why;
}

}  // namespace

TlsContexts::TlsContexts(const TlsConfig& config) : config_(config) {
  loaded_ = stamp();
  current_ = load();
  if (config_.reload_interval.count() > 0) {
    watcher_ = std::jthread([this](std::stop_token stop) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      while (!cv.wait_for(lock, stop, config_.reload_interval, [] { return false; })) {
        if (stop.stop_requested()) return;
        reload_if_changed();
      }
    });
  }
}

TlsContexts::~TlsContexts() = default;

std::shared_ptr<ssl::context> TlsContexts::load() const {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  auto* h = ctx->native_handle();
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression | ssl::context::single_dh_use);
  auto version = [](TlsVersion v) { return v == TlsVersion::v1_3 ? TLS1_3_VERSION : TLS1_2_VERSION; };
  SSL_CTX_set_min_proto_version(h, version(config_.min_version));
  SSL_CTX_set_max_proto_version(h, version(config_.max_version));
  // The names were checked at start-up (app/sidecar/tls_knobs): OpenSSL refusing them here is a bug, not input.
  const std::string& ciphers = config_.tls12_ciphers.empty() ? std::string(kTls12Ciphers) : config_.tls12_ciphers;
  if (SSL_CTX_set_cipher_list(h, ciphers.c_str()) != 1)
    throw ConfigError("QUEUE_PROXY_TLS_CIPHER_SUITES: OpenSSL accepts none of " + ciphers);
  const std::string& groups = config_.groups.empty() ? std::string(kGroups) : config_.groups;
  if (SSL_CTX_set1_groups_list(h, groups.c_str()) != 1)
    throw ConfigError("QUEUE_PROXY_TLS_CURVE_PREFERENCES: OpenSSL accepts none of " + groups);
  if (SSL_CTX_set_ciphersuites(h, kTls13Suites) != 1 || SSL_CTX_set1_sigalgs_list(h, kSignatureAlgorithms) != 1)
    throw ConfigError("TLS: this OpenSSL lacks TLS 1.3's AES-GCM and ChaCha20 suites or ECDSA/RSA-PSS signatures");
  SSL_CTX_set_options(h, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA | SSL_OP_NO_RENEGOTIATION);
  // Resumption: a server-side session cache and (OpenSSL's default) session tickets.
  SSL_CTX_set_session_cache_mode(h, SSL_SESS_CACHE_SERVER);
  static constexpr unsigned char kSessionContext[] = "sluice";
  SSL_CTX_set_session_id_context(h, kSessionContext, sizeof kSessionContext - 1);
  SSL_CTX_set_alpn_select_cb(h, select_alpn, nullptr);
  error_code ec;
  ctx->use_certificate_chain_file(config_.cert_file, ec);
  if (ec) throw ConfigError("TLS certificate " + config_.cert_file + ": " + openssl_reason(ec));
  ctx->use_private_key_file(config_.key_file, ssl::context::pem, ec);
  if (ec) throw ConfigError("TLS key " + config_.key_file + ": " + openssl_reason(ec));
  if (SSL_CTX_check_private_key(h) != 1)
    throw ConfigError("TLS key " + config_.key_file + " does not match certificate " + config_.cert_file);
  return ctx;
}

TlsContexts::Stamp TlsContexts::stamp() const {
  Stamp s;
  std::error_code ec;
  s.cert = std::filesystem::last_write_time(config_.cert_file, ec);
  s.key = std::filesystem::last_write_time(config_.key_file, ec);
  s.cert_size = std::filesystem::file_size(config_.cert_file, ec);
  s.key_size = std::filesystem::file_size(config_.key_file, ec);
  return s;
}

std::shared_ptr<ssl::context> TlsContexts::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

bool TlsContexts::reload_if_changed() {
  auto now = stamp();
  {
    std::lock_guard lock(mu_);
    if (now == loaded_) return false;
  }
  try {
    auto fresh = load();
    std::lock_guard lock(mu_);
    current_ = std::move(fresh);
    loaded_ = now;
  } catch (const std::exception& e) {
    // Half-written files (the key replaced before the certificate, say) are retried on the next check;
    // a pair that stays bad is logged once, not at every check.
    bool logged;
    {
      std::lock_guard lock(mu_);
      logged = failed_ == now;
      failed_ = now;
    }
    if (!logged) log::warn("TLS reload failed; keeping the current certificate").kv("error", e.what());
    return false;
  }
  log::info("TLS certificate reloaded").kv("cert", config_.cert_file);
  return true;
}

asio::awaitable<bool> serve_tls(ServerContext& worker, tcp::socket socket, std::shared_ptr<ssl::context> context) {
  using namespace asio::experimental::awaitable_operators;
  error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  auto stream = std::make_unique<Downstream::TlsStream>(std::move(socket), *context);
  asio::steady_timer limit(stream->get_executor(), worker.config.timeouts.client_header);
  auto done = co_await (stream->async_handshake(ssl::stream_base::server, use_nothrow) || limit.async_wait(use_nothrow));
  if (done.index() == 1 || std::get<0>(std::get<0>(done))) {
    stream->next_layer().close(ec);  // a failed or stalled handshake: nothing to answer in HTTP
    co_return false;
  }
  const unsigned char* alpn = nullptr;
  unsigned int alpn_len = 0;
  SSL_get0_alpn_selected(stream->native_handle(), &alpn, &alpn_len);
  const bool h2 = alpn_len == 2 && alpn[0] == 'h' && alpn[1] == '2';
  Downstream down(std::move(stream), std::move(context));
  if (h2) {
    PeerName peer = peer_name(down.socket());
    h2::start(worker, {.socket = std::move(down)}, std::move(peer));
    co_return true;
  }
  const std::string nothing;
  co_return co_await h1::serve(worker, down, nothing);
}

}  // namespace sluice::proxy
