// How many connections to the app the current thread holds open: each connection object counts itself for
// its life. A worker fills Asio's pool of socket states ahead of its sockets, clients' and app's alike
// (proxy/server/server.cpp, reserve_socket_states), and reads this for the app's part.
#pragma once

#include <cstddef>

namespace sluice::proxy {

class AppSocketCount {
 public:
  AppSocketCount() noexcept { ++open(); }
  ~AppSocketCount() { --open(); }
  AppSocketCount(const AppSocketCount&) = delete;
  AppSocketCount& operator=(const AppSocketCount&) = delete;

  // This thread's count. Signed: a connection a worker made may end on the thread that destroys the
  // worker, whose count then goes below zero, harmlessly (it accepts no connection).
  static std::ptrdiff_t& open() noexcept {
    thread_local std::ptrdiff_t n = 0;
    return n;
  }
};

}  // namespace sluice::proxy
