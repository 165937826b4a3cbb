// Status output; see status_view.h.
#include "app/gateway/status_view.h"

#include <unistd.h>

#include <cstdio>

#include <boost/json/serialize.hpp>

#include "common/log.h"

namespace sluice::app::gateway {
namespace {

namespace json = boost::json;

std::string num(const json::value& v) {
  if (v.is_double()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v.as_double());
    return buf;
  }
  if (v.is_int64()) return std::to_string(v.as_int64());
  if (v.is_uint64()) return std::to_string(v.as_uint64());
  return "-";
}

std::string str(const json::value& v) { return v.is_string() ? std::string(v.as_string()) : num(v); }

}  // namespace

StatusView::StatusView(asio::io_context& control, const Fleet& fleet, const std::string& mode)
    : timer_(control), fleet_(fleet) {
  if (mode == "none") mode_ = Mode::none;
  else if (mode == "tty") mode_ = Mode::tty;
  else if (mode == "json") mode_ = Mode::json;
  else mode_ = ::isatty(STDERR_FILENO) ? Mode::tty : Mode::json;
}

void StatusView::start() {
  if (mode_ != Mode::none) asio::co_spawn(timer_.get_executor(), loop(), asio::detached);
}

void StatusView::stop() {
  asio::post(timer_.get_executor(), [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

std::string StatusView::table(const json::object& status) {
  std::string out;
  for (const auto& sv : status.at("services").as_array()) {
    const auto& s = sv.as_object();
    const auto& instances = s.at("instances").as_array();
    char line[512];
    std::snprintf(line, sizeof line, "%-16s %2zu inst  want %-3s in-flight %-4s queued %-4s %6s rps  cold starts %s",
                  str(s.at("name")).c_str(), instances.size(), num(s.at("desired")).c_str(),
                  num(s.at("in_flight")).c_str(), num(s.at("queued")).c_str(), num(s.at("rps")).c_str(),
                  num(s.at("cold_starts")).c_str());
    out += line;
    if (auto* ms = s.if_contains("last_cold_start_ms")) out += " (last " + num(*ms) + " ms)";
    if (auto* f = s.if_contains("failed")) out += "  FAILED: " + str(*f);
    out += "\n";
    for (const auto& iv : instances) {
      const auto& i = iv.as_object();
      std::snprintf(line, sizeof line, "  %-18s :%-5s %-9s in-flight %-4s requests %s\n", str(i.at("id")).c_str(),
                    num(i.at("port")).c_str(), str(i.at("state")).c_str(), num(i.at("in_flight")).c_str(),
                    num(i.at("requests")).c_str());
      out += line;
    }
  }
  return out;
}

asio::awaitable<void> StatusView::loop() {
  while (!stopped_) {
    auto status = fleet_.status();
    // rps moves every second even when nothing else does; compare without it.
    auto key = status;
    for (auto& s : key["services"].as_array()) {
      s.as_object().erase("rps");
      s.as_object().erase("concurrency");
    }
    auto text = json::serialize(key);
    if (text != last_) {
      last_ = std::move(text);
      if (mode_ == Mode::tty) {
        std::string out = "\x1b[2m── sluice gateway ──\x1b[0m\n" + table(status);
        std::fwrite(out.data(), 1, out.size(), stderr);
      } else {
        std::string line = R"({"level":"info","msg":"status","status":)" + json::serialize(status) + "}";
        log::write_line(line);
      }
    }
    timer_.expires_after(std::chrono::milliseconds(500));
    auto [ec] = co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

}  // namespace sluice::app::gateway
