// TLS termination: the server context (certificate and key from PEM files, TLS versions, ciphers and
// curves as Knative's QUEUE_PROXY_TLS_* variables set them, session resumption, ALPN h2 / http/1.1), reloaded when the files change,
// and the entry point for connections accepted on the TLS port.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "proxy/exchange/config.h"
#include "proxy/exchange/downstream.h"

namespace sluice::proxy {

struct ServerContext;

class TlsContexts {
 public:
  // Loads the pair at once: throws ConfigError naming the file and OpenSSL's reason when the
  // certificate or key is missing, unreadable, malformed or not a pair.
  explicit TlsContexts(const TlsConfig& config);
  ~TlsContexts();
  TlsContexts(const TlsContexts&) = delete;
  TlsContexts& operator=(const TlsContexts&) = delete;

  // The context for a new connection; connections keep theirs after a reload.
  std::shared_ptr<ssl::context> current() const;
  // Reloads when either file changed since the last load; a bad new pair is logged (once while the files
  // stay as they are) and the old one kept.
  // Returns whether a new context is in use. Also called every `reload_interval` by a thread of its own.
  bool reload_if_changed();

 private:
  struct Stamp {
    std::filesystem::file_time_type cert, key;
    std::uintmax_t cert_size = 0, key_size = 0;
    bool operator==(const Stamp&) const = default;
  };
  std::shared_ptr<ssl::context> load() const;
  Stamp stamp() const;

  TlsConfig config_;
  mutable std::mutex mu_;
  std::shared_ptr<ssl::context> current_;
  Stamp loaded_;
  Stamp failed_;  // the files as they were at the last failed reload: logged once
  std::jthread watcher_;
};

// An accepted TLS-port connection: handshake (bounded by the client-header timeout), then h2 or
// HTTP/1.1 as ALPN chose. Returns whether the connection lives on in the codec's own coroutine (or, for
// HTTP/1.1 between requests, in its h1::Link), false when it ended here.
asio::awaitable<bool> serve_tls(ServerContext& worker, tcp::socket socket, std::shared_ptr<ssl::context> context);

}  // namespace sluice::proxy
