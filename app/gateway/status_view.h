// What the gateway shows while it runs: on a TTY a compact table of services and instances, redrawn
// when it changes; otherwise one JSON line per change (the same object as GET /.sluice/status).
#pragma once

#include <string>

#include "app/gateway/fleet.h"

namespace sluice::app::gateway {

class StatusView {
 public:
  // `mode`: auto (tty when stderr is a terminal, else json), tty, json or none.
  StatusView(asio::io_context& control, const Fleet& fleet, const std::string& mode);
  void start();
  void stop();

  // The table for a status object (exposed for tests).
  static std::string table(const boost::json::object& status);

 private:
  asio::awaitable<void> loop();
  asio::steady_timer timer_;
  const Fleet& fleet_;
  enum class Mode { none, tty, json } mode_;
  std::string last_;
  bool stopped_ = false;
};

}  // namespace sluice::app::gateway
