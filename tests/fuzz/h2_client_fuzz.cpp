// libFuzzer: bytes as an app speaking h2c sends them back to sluice's h2c client. The real h2::ClientPool
// connects over loopback to an app in this process, which reads sluice's preface and the HEADERS of the
// one to three requests sluice sends, then answers with the input in fuzzer-chosen pieces (SETTINGS,
// HEADERS/CONTINUATION with heads and trailers, DATA, RST_STREAM, GOAWAY, WINDOW_UPDATE… on streams 1, 3,
// 5) and half-closes. Each request runs as the forwarder drives a ClientExchange: send the head (and a
// body with trailers), read the heads up to the final one, read and consume the body, take the trailers.
// Every input must end every exchange and connection: anything still running after kLimit is a hang (abort).
//
// The first byte steers: bits 0-3 the piece size (2^n bytes), bits 4-5 the requests (0: one, 1: two, 2: three,
// 3: two, the second a HEAD), bit 6 makes the first a POST with a body and trailers, bit 7 limits response
// heads to 512 bytes (instead of 64 KiB, beyond what a short input reaches).
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/log.h"
#include "proxy/upstream/h2_client.h"

namespace {

using namespace sluice::proxy;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

constexpr auto kLimit = 5s;
constexpr std::size_t kPrefaceSize = 24;

bool trace = false;  // SLUICE_FUZZ_TRACE=1: a line per exchange (to check what a seed reaches)

void discard_line(std::string&) {}

struct Request final : UpstreamRequest {
  void fields(FieldSink& out) const override {
    out.field("Host", "app.example");
    out.field("User-Agent", "fuzz");
    out.field("X-Forwarded-For", "192.0.2.1");
  }
};

// One exchange as the forwarder runs it.
asio::awaitable<void> exchange(h2::ClientPool& pool, bool post, bool head) {
  std::string outcome = "open failed";
  struct Report {
    std::string& what;
    ~Report() {
      if (trace) std::fprintf(stderr, "h2_client_fuzz: exchange: %s\n", what.c_str());
    }
  } report{outcome};
  auto [oec, stream] = co_await pool.open();
  if (oec) co_return;
  outcome = "no head";
  Request r;
  r.method = post ? "POST" : head ? "HEAD" : "GET";
  r.target = "/fuzz";
  static constexpr std::string_view kBody = "hello world";
  if (post) r.body = {.kind = BodyKind::length, .content_length = kBody.size()};
  const std::optional<asio::const_buffer> no_body;
  if (co_await stream->send_head(r, no_body)) co_return;
  if (post) {
    const asio::const_buffer body = asio::buffer(kBody);
    if (co_await stream->write_body(body)) co_return;
    const FieldList trailers{{"x-checksum", "1"}};
    if (co_await stream->end_body(trailers)) co_return;
  }
  while (true) {  // interim heads, then the final one
    auto [hec, h] = co_await stream->read_head();
    if (hec) co_return;
    outcome = "status " + std::to_string(h->result_int());
    if (h->result_int() >= 200) break;
  }
  (void)stream->response_body();
  (void)stream->body_at_hand();
  while (true) {
    auto [bec, data] = co_await stream->read_body();
    if (bec) {
      outcome += ", body cut";
      co_return;
    }
    if (data.size() == 0) break;
    outcome += ", " + std::to_string(data.size()) + " body bytes";
    stream->consume_body(data.size());
  }
  outcome += ", " + std::to_string(stream->trailers().size()) + " trailers, complete";
  auto* done = stream.get();
  done->release(std::move(stream));  // a clean end: back to its connection
}

asio::awaitable<void> exchanges(const tcp::endpoint& app, int count, bool post, bool head, std::size_t max_head_bytes) {
  auto ex = co_await asio::this_coro::executor;
  sluice::net::Watchdogs watchdogs(ex);
  // No idle timeout: the pool closes its connections when the run ends.
  h2::ClientPool pool(ex, watchdogs, app, Clock::duration::zero(), 1s, max_head_bytes);
  if (count == 1) co_await exchange(pool, post, false);
  else if (count == 2) co_await (exchange(pool, post, false) && exchange(pool, false, head));
  else co_await (exchange(pool, post, false) && exchange(pool, false, head) && exchange(pool, false, false));
}

asio::awaitable<void> read_all(tcp::socket& s) {
  char buf[16 * 1024];
  while (true) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_nothrow);
    (void)n;
    if (ec) co_return;
  }
}

asio::awaitable<void> write_all(tcp::socket& s, std::string_view input, std::size_t piece) {
  while (!input.empty()) {
    auto n = std::min(piece, input.size());
    auto [ec, written] = co_await asio::async_write(s, asio::buffer(input.data(), n), use_nothrow);
    (void)written;
    if (ec) break;
    input.remove_prefix(n);
  }
  error_code ignore;
  s.shutdown(tcp::socket::shutdown_send, ignore);
}

// The app: one connection; waits for sluice's `requests` HEADERS frames, then answers with the input.
asio::awaitable<void> app(tcp::acceptor& acceptor, std::string_view input, std::size_t piece, int requests) {
  auto [aec, s] = co_await acceptor.async_accept(use_nothrow);
  error_code ignore;
  acceptor.close(ignore);  // a second connection is refused
  if (aec) co_return;
  std::string got;
  std::size_t pos = kPrefaceSize;
  int headers = 0;
  char buf[4096];
  while (headers < requests) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_nothrow);
    if (ec) co_return;
    got.append(buf, n);
    while (got.size() >= pos + 9) {
      const auto* f = reinterpret_cast<const std::uint8_t*>(got.data() + pos);
      const std::size_t length = (std::size_t{f[0]} << 16) | (std::size_t{f[1]} << 8) | f[2];
      if (f[3] == 0x1) ++headers;
      pos += 9 + length;
    }
  }
  co_await (read_all(s) && write_all(s, input, piece));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::signal(SIGPIPE, SIG_IGN);
  trace = std::getenv("SLUICE_FUZZ_TRACE") != nullptr;
  sluice::log::set_sink(&discard_line);  // the lines are still built, not printed
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = std::size_t{1} << (data[0] & 0x0f);
  const int mode = (data[0] >> 4) & 3;
  const int requests = mode == 3 ? 2 : 1 + mode;
  const bool head = mode == 3;
  const bool post = data[0] & 0x40;
  const std::size_t max_head_bytes = data[0] & 0x80 ? 512 : 64 * 1024;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto endpoint = acceptor.local_endpoint();
  asio::co_spawn(io, app(acceptor, input, piece, requests), [](std::exception_ptr e) {
    if (e) std::abort();
  });
  asio::co_spawn(io, exchanges(endpoint, requests, post, head, max_head_bytes), [](std::exception_ptr e) {
    if (e) std::abort();
  });
  // Until nothing is left to run: every exchange, the app and sluice's connection (reader, writer) ended.
  const auto deadline = Clock::now() + kLimit;
  while (!io.stopped() && Clock::now() < deadline) io.run_one_for(kLimit);
  if (!io.stopped()) {
    std::fprintf(stderr, "h2_client_fuzz: still running after %lld s\n", static_cast<long long>(kLimit.count()));
    std::abort();
  }
  return 0;
}
