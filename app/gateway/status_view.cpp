// Status output; see status_view.h.
#include "app/gateway/status_view.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "app/gateway/json_text.h"
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

void write_all(const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// The table at the bottom of the terminal: each log line erases it, goes out, and the table is drawn
// again below it, in one write so that nothing interleaves.
struct Screen {
  std::mutex mu;
  std::string table;      // as drawn (lines cut to the terminal's width)
  std::size_t lines = 0;  // rows it takes

  std::string erase() const {
    if (lines == 0) return {};
    return "\r\x1b[" + std::to_string(lines) + "A\x1b[J";
  }
  static void sink(std::string& line) {
    auto& s = instance();
    std::lock_guard lock(s.mu);
    write_all(s.erase() + line + s.table);
  }
  void draw(std::string next) {
    std::lock_guard lock(mu);
    std::string out = erase() + next;
    table = std::move(next);
    lines = 0;
    for (char c : table) lines += c == '\n';
    write_all(out);
  }
  void release() {
    std::lock_guard lock(mu);
    table.clear();
    lines = 0;  // the last table stays where it is, above what follows
  }
  static Screen& instance() {
    static Screen s;
    return s;
  }
};

std::size_t terminal_width() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

// Cuts a line to `width` columns (counting UTF-8 code points, not bytes) so that it takes one row.
std::string fit(const std::string& line, std::size_t width) {
  if (width == 0) return line;
  std::size_t cols = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;
    if (++cols > width - 1) return line.substr(0, i);
  }
  return line;
}

}  // namespace

StatusView::StatusView(asio::io_context& control, Fleet& fleet, const std::string& mode, std::string serving)
    : timer_(control), fleet_(fleet), serving_(std::move(serving)) {
  if (mode == "none") mode_ = Mode::none;
  else mode_ = is_terminal(mode) ? Mode::tty : Mode::json;
}

StatusView::~StatusView() {
  if (mode_ == Mode::tty) {
    log::set_sink(nullptr);
    Screen::instance().release();
  }
}

bool StatusView::is_terminal(const std::string& mode) {
  return mode == "tty" || (mode == "auto" && ::isatty(STDOUT_FILENO));
}

void StatusView::start() {
  if (mode_ == Mode::tty) log::set_sink(&Screen::sink);
  if (mode_ == Mode::none) return;
  // An instance that starts, becomes ready or goes is shown at once; the rest (rates, frozen) at the poll.
  fleet_.on_instances_changed([this] { refresh(); });
  asio::co_spawn(timer_.get_executor(), loop(), asio::detached);
}

void StatusView::stop() {
  stopped_ = true;  // on the control thread, as every refresh: none draws after this
  timer_.cancel();
  if (mode_ == Mode::tty) {
    log::set_sink(nullptr);
    Screen::instance().release();
  }
}

std::string StatusView::table(const json::object& status, std::size_t width) {
  std::string out;
  auto add = [&](const std::string& line) { out += fit(line, width) + "\n"; };
  for (const auto& sv : status.at("services").as_array()) {
    const auto& s = sv.as_object();
    const auto& instances = s.at("instances").as_array();
    char line[512];
    std::snprintf(line, sizeof line, "%-16s %2zu inst  want %-3s in-flight %-4s queued %-4s %6s rps  cold starts %s",
                  str(s.at("name")).c_str(), instances.size(), num(s.at("desired")).c_str(),
                  num(s.at("in_flight")).c_str(), num(s.at("queued")).c_str(), num(s.at("rps")).c_str(),
                  num(s.at("cold_starts")).c_str());
    std::string text = line;
    // The revision, or a split's every share ("hello-v1 50%, hello-v2 50%").
    std::string shares;
    if (auto* revisions = s.if_contains("revisions"); revisions && revisions->is_array())
      for (const auto& rv : revisions->as_array())
        if (const auto& r = rv.as_object(); r.contains("traffic_percent") && num(r.at("traffic_percent")) != "0" &&
                                            num(r.at("traffic_percent")) != "100")
          shares += (shares.empty() ? "" : ", ") + str(r.at("name")) + " " + num(r.at("traffic_percent")) + "%";
    if (!shares.empty()) text += "  " + shares;
    else if (auto* r = s.if_contains("revision")) text += "  " + str(*r);
    if (auto* ms = s.if_contains("last_cold_start_ms")) text += " (last " + num(*ms) + " ms)";
    if (auto* f = s.if_contains("failed")) text += "  FAILED: " + str(*f);
    add(text);
    for (const auto& iv : instances) {
      const auto& i = iv.as_object();
      std::string state = str(i.at("state"));
      if (auto* fz = i.if_contains("frozen"); fz && fz->is_bool() && fz->as_bool()) state = "frozen";
      std::snprintf(line, sizeof line, "  %-18s :%-5s %-9s in-flight %-4s requests %s", str(i.at("id")).c_str(),
                    num(i.at("port")).c_str(), state.c_str(), num(i.at("in_flight")).c_str(),
                    num(i.at("requests")).c_str());
      add(line);
    }
  }
  return out;
}

void StatusView::refresh() {
  if (stopped_) return;
  auto status = fleet_.status();
  // rps moves every second even when nothing else does; compare without it.
  auto key = status;
  for (auto& s : key["services"].as_array()) {
    s.as_object().erase("rps");
    s.as_object().erase("concurrency");
  }
  auto text = json_text(key);
  if (text == last_) return;
  last_ = std::move(text);
  if (mode_ == Mode::tty) {
    auto width = terminal_width();
    // The title's escape sequences take no columns (8 bytes); width 0: the terminal did not say, no cut.
    Screen::instance().draw(fit("\x1b[2m── sluice gateway " + serving_ + " ──\x1b[0m", width ? width + 8 : 0) + "\n" +
                            table(status, width));
  } else {
    log::info("status").kv("event", "status").raw_json("status", json_text(status));
  }
}

asio::awaitable<void> StatusView::loop() {
  while (!stopped_) {
    refresh();
    timer_.expires_after(std::chrono::milliseconds(500));
    auto [ec] = co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

}  // namespace sluice::app::gateway
