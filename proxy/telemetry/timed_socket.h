// A blocking client connection, plain TCP or TLS (proxy/io/tls_client.h), whose every operation ends by a
// deadline: what the export thread talks to a collector with. A collector that is down, slow or not
// trusted costs the export thread time, never a worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/http_client.h"
#include "proxy/telemetry/config.h"

namespace sluice::proxy::telemetry {

using ExportClock = std::chrono::steady_clock;

class TimedSocket {
 public:
  TimedSocket();
  ~TimedSocket();
  TimedSocket(const TimedSocket&) = delete;
  TimedSocket& operator=(const TimedSocket&) = delete;

  // Resolves and connects to `endpoint`; a TLS endpoint's certificate is verified against the system's
  // CA roots and its host, and `alpn` ("h2", "http/1.1") offered. False with `error` set on failure or
  // when the deadline passes.
  bool connect(const Endpoint& endpoint, std::string_view alpn, ExportClock::time_point deadline, std::string& error);
  bool write_all(std::string_view data, ExportClock::time_point deadline, std::string& error);
  // Reads what is there (waiting for some); 0 means the peer closed; -1 an error or the deadline (then
  // `error` is "timed out").
  long read_some(char* buf, std::size_t size, ExportClock::time_point deadline, std::string& error);
  // One HTTP/1.1 exchange on the connection through the one client (common/http_client.h), by `deadline`.
  net::HttpReply http_exchange(std::string_view head, std::string_view body, const net::HttpLimits& limits,
                               ExportClock::time_point deadline);
  bool is_open() const;
  void close();

 private:
  struct Connection;  // Asio's io_context and the socket, kept out of the exporters' headers
  std::unique_ptr<Connection> conn_;
};

}  // namespace sluice::proxy::telemetry
