// What the gateway shows while it runs. On a terminal: the log lines scroll (one a request among them),
// and below them stay a title naming where the gateway serves and a compact table of services and
// instances, redrawn in place when it changes (never reprinted into the scrollback). Otherwise: one JSON line per change, shaped like every other log line
// ({"severity","timestamp","logger","message":"status","status":{...}}), on the same stream (stdout).
#pragma once

#include <string>

#include "app/gateway/fleet.h"

namespace sluice::app::gateway {

class StatusView {
 public:
  // `mode`: auto (tty when stdout is a terminal, else json), tty, json or none. `serving`: the title's
  // text after "sluice gateway" (where requests go, where the dashboard is).
  StatusView(asio::io_context& control, Fleet& fleet, const std::string& mode, std::string serving);
  ~StatusView();
  void start();
  // Leaves the last table on the screen; log lines go straight to stdout again. On the control thread.
  void stop();

  // Whether `mode` means the terminal table (auto: stdout is a terminal).
  static bool is_terminal(const std::string& mode);
  // The table for a status object (exposed for tests); lines cut to `width` columns when not 0.
  static std::string table(const boost::json::object& status, std::size_t width = 0);

 private:
  asio::awaitable<void> loop();
  void refresh();  // on the control thread: drawn (or logged) when the status changed
  asio::steady_timer timer_;
  Fleet& fleet_;
  std::string serving_;
  enum class Mode { none, tty, json } mode_;
  std::string last_;
  bool stopped_ = false;
};

}  // namespace sluice::app::gateway
