// Per-worker keep-alive pool of HTTP/1.1 connections to the app. Owned by one worker thread: no locks.
#pragma once

#include <memory>
#include <vector>

#include "proxy/asio.h"

namespace sluice::proxy {

struct UpstreamConnection {
  explicit UpstreamConnection(const asio::any_io_executor& ex) : socket(ex) {}
  tcp::socket socket;
  beast::flat_buffer buffer;  // bytes read past the previous response are never kept: see release()
  bool reused = false;        // came from the pool: a failure before any response byte may be retried
  Clock::time_point idle_since;
};

class UpstreamPool {
 public:
  UpstreamPool(const asio::any_io_executor& ex, tcp::endpoint endpoint, std::size_t max_idle,
               Clock::duration connect_timeout);

  // An idle connection, or a new one. Error: connection refused, timeout, ... A pooled connection is
  // checked for a close by the app when `verify` is set or it has been idle long enough for the app to
  // have timed it out; otherwise the caller retries a failed first attempt instead (cheaper under load).
  asio::awaitable<std::tuple<error_code, std::unique_ptr<UpstreamConnection>>> acquire(bool verify);
  // Returns a connection whose last exchange completed cleanly and left no unread bytes.
  void release(std::unique_ptr<UpstreamConnection> conn);
  void close_idle();

  std::size_t idle_count() const { return idle_.size(); }
  const tcp::endpoint& endpoint() const { return endpoint_; }

 private:
  asio::any_io_executor ex_;
  tcp::endpoint endpoint_;
  std::size_t max_idle_;
  Clock::duration connect_timeout_;
  std::vector<std::unique_ptr<UpstreamConnection>> idle_;  // LIFO: the warmest connection first
};

}  // namespace sluice::proxy
