// A small HTTP/1.1 server for sluice's own endpoints (admin, autoscaler stats, user metrics): one
// coroutine per connection on the control thread, a handler per listener. Not the data path. A HEAD
// request gets the head of what its handler answers, Content-Length included, and no body.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/net.h"
#include "common/netns.h"

namespace sluice::net {

using ControlRequest = http::request<http::string_body>;

struct ControlResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";  // empty: no Content-Type
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // more fields (Metadata-Flavor, Cache-Control)
};

// The client's address and port as "ADDRESS:PORT", set by the listener on every request it hands over
// (a client's own value of this field is replaced).
inline constexpr const char* kPeerField = "X-Sluice-Peer";

using ControlHandler = std::function<asio::awaitable<ControlResponse>(const ControlRequest&)>;

class ControlListener {
 public:
  // Binds at once (no SO_REUSEPORT), in `netns` (common/netns.h); throws AddressInUse (common/listen.h), or
  // std::system_error naming the listener and the address.
  ControlListener(asio::io_context& io, const std::string& name, const std::string& address,
                  std::uint16_t port, ControlHandler handler, const Netns& netns = {});
  std::uint16_t port() const { return port_; }
  const std::string& name() const { return name_; }
  void start();
  void close();

 private:
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(tcp::socket socket);

  std::string name_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  ControlHandler handler_;
};

}  // namespace sluice::net
