// What the gateway shows while it runs. On a terminal: the log lines scroll, and a compact table of
// services and instances stays below them, redrawn in place when it changes (never reprinted into the
// scrollback). Otherwise: one JSON line per change, shaped like every other log line
// ({"severity","timestamp","logger","message":"status","status":{...}}), on the same stream (stdout).
#pragma once

#include <string>

#include "app/gateway/fleet.h"

namespace sluice::app::gateway {

class StatusView {
 public:
  // `mode`: auto (tty when stdout is a terminal, else json), tty, json or none.
  StatusView(asio::io_context& control, const Fleet& fleet, const std::string& mode);
  ~StatusView();
  void start();
  // Leaves the last table on the screen; log lines go straight to stdout again.
  void stop();

  // Whether `mode` means the terminal table (auto: stdout is a terminal).
  static bool is_terminal(const std::string& mode);
  // The table for a status object (exposed for tests); lines cut to `width` columns when not 0.
  static std::string table(const boost::json::object& status, std::size_t width = 0);

 private:
  asio::awaitable<void> loop();
  asio::steady_timer timer_;
  const Fleet& fleet_;
  enum class Mode { none, tty, json } mode_;
  std::string last_;
  bool stopped_ = false;
};

}  // namespace sluice::app::gateway
