// Request routing and the small fixed-body routes: /, /headers, /status, /stats, /delay, /trailers, /env, /exit.
#include "demo/routes.h"

#include <boost/beast/websocket/rfc6455.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "demo/response_head.h"

namespace sluice::demo {
namespace {

constexpr std::string_view kHello = "Hello from sluice-demo-app\n";
constexpr std::string_view kTextPlain = "text/plain";

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// True when `path` is `prefix` followed by a number; the number goes to `out`.
bool numbered(std::string_view path, std::string_view prefix, std::uint64_t& out) {
  if (!path.starts_with(prefix)) return false;
  auto n = parse_u64(path.substr(prefix.size()));
  if (!n) return false;
  out = *n;
  return true;
}

bool query_has(std::string_view query, std::string_view param) {
  while (!query.empty()) {
    auto amp = query.find('&');
    if (query.substr(0, amp) == param) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

asio::awaitable<bool> route_headers(Exchange& ex) {
  const auto& req = ex.parser.get();
  std::string body;
  body.reserve(512);
  body.append(req.method_string()).push_back(' ');
  body.append(req.target()).append(req.version() >= 11 ? " HTTP/1.1\n" : " HTTP/1.0\n");
  for (const auto& f : req)
    body.append(f.name_string()).append(": ").append(f.value()).push_back('\n');
  co_return co_await respond(ex, 200, kTextPlain, body);
}

asio::awaitable<bool> route_status(Exchange& ex, std::uint64_t code) {
  if (code < 200 || code > 599) co_return co_await respond(ex, 400, kTextPlain, "bad status\n");
  std::string body = "status " + std::to_string(code) + "\n";
  co_return co_await respond(ex, static_cast<unsigned>(code), kTextPlain, body);
}

// The value of an environment variable (the gateway's contract: PORT, K_SERVICE, ...), 404 when unset.
asio::awaitable<bool> route_env(Exchange& ex, std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (!v) co_return co_await respond(ex, 404, kTextPlain, "unset\n");
  co_return co_await respond(ex, 200, kTextPlain, std::string(v) + "\n");
}

// Answers, then ends the process with the given code: a crash, as a supervisor sees it.
asio::awaitable<bool> route_exit(Exchange& ex, std::uint64_t code) {
  co_await respond(ex, 200, kTextPlain, "exiting " + std::to_string(code) + "\n");
  std::fflush(stdout);
  std::_Exit(static_cast<int>(code & 0xff));
}

asio::awaitable<bool> route_stats(Exchange& ex) {
  std::string body =
      "requests=" + std::to_string(stats().requests.load(std::memory_order_relaxed)) +
      " connections=" + std::to_string(stats().connections.load(std::memory_order_relaxed));
  co_return co_await respond(ex, 200, kTextPlain, body);
}

asio::awaitable<bool> route_delay(Exchange& ex, std::uint64_t ms) {
  asio::steady_timer timer(ex.socket.get_executor(), std::chrono::milliseconds(ms));
  auto [ec] = co_await timer.async_wait(use_nothrow);
  if (ec) co_return false;
  std::string body = "delayed " + std::to_string(ms) + "\n";
  co_return co_await respond(ex, 200, kTextPlain, body);
}

asio::awaitable<bool> route_trailers(Exchange& ex) {
  ResponseHead(ex.head, 200)
      .field("Content-Type", kTextPlain)
      .field("Trailer", "X-Checksum")
      .chunked()
      .finish(ex.keep_alive, ex.parser.get().version());
  if (ex.head_only) co_return !(co_await write_all(ex, ex.head));
  // One write: head, one chunk, the last chunk and its trailer.
  ex.head.append("5\r\nhello\r\n0\r\nX-Checksum: abc123\r\n\r\n");
  co_return !(co_await write_all(ex, ex.head));
}

// 103 Early Hints, then the response: an interim head a proxy should pass on.
asio::awaitable<bool> route_early_hints(Exchange& ex) {
  static constexpr std::string_view k103 = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";
  if (co_await write_all(ex, k103)) co_return false;
  co_return co_await respond(ex, 200, kTextPlain, "hinted\n");
}

}  // namespace

asio::awaitable<bool> respond(Exchange& ex, unsigned status, std::string_view content_type,
                              std::string_view body) {
  bool bodyless = status < 200 || status == 204 || status == 304;
  ResponseHead head(ex.head, status);
  if (!bodyless) head.field("Content-Type", content_type).content_length(body.size());
  head.finish(ex.keep_alive, ex.parser.get().version());
  if (ex.head_only || bodyless) co_return !(co_await write_all(ex, ex.head));
  // Small bodies go into the head's string: one contiguous buffer, one send(2).
  if (body.size() <= 4096) {
    ex.head.append(body);
    co_return !(co_await write_all(ex, ex.head));
  }
  co_return !(co_await write_head_and_body(ex, body));
}

asio::awaitable<bool> dispatch(Exchange& ex) {
  std::string_view target = ex.parser.get().target();
  auto qmark = target.find('?');
  std::string_view path = target.substr(0, qmark);
  std::string_view query =
      qmark == std::string_view::npos ? std::string_view{} : target.substr(qmark + 1);
  std::uint64_t n = 0;

  if (path == "/") co_return co_await respond(ex, 200, kTextPlain, kHello);
  if (path == "/echo") co_return co_await route_echo(ex);
  if (path == "/sink") co_return co_await route_sink(ex);
  if (numbered(path, "/bytes/", n))
    co_return co_await route_bytes(ex, n, query_has(query, "chunked=1"));
  if (path == "/headers") co_return co_await route_headers(ex);
  if (numbered(path, "/delay/", n)) co_return co_await route_delay(ex, n);
  if (path.starts_with("/slow-body/")) {
    auto rest = path.substr(11);
    auto slash = rest.find('/');
    auto chunks = parse_u64(rest.substr(0, slash));
    auto gap = slash == std::string_view::npos ? std::nullopt : parse_u64(rest.substr(slash + 1));
    if (chunks && gap) co_return co_await route_slow_body(ex, *chunks, *gap);
  }
  if (path == "/close-mid") co_return co_await route_close_mid(ex);
  if (path == "/close-immediately") co_return false;
  if (numbered(path, "/status/", n)) co_return co_await route_status(ex, n);
  if (path == "/trailers") co_return co_await route_trailers(ex);
  if (path == "/early-hints") co_return co_await route_early_hints(ex);
  if (path == "/ws" && beast::websocket::is_upgrade(ex.parser.get())) {
    co_return co_await route_websocket(ex);
  }
  if (path == "/stats") co_return co_await route_stats(ex);
  if (path.starts_with("/env/")) co_return co_await route_env(ex, path.substr(5));
  if (numbered(path, "/exit/", n)) co_return co_await route_exit(ex, n);
  co_return co_await respond(ex, 404, kTextPlain, "not found\n");
}

}  // namespace sluice::demo
