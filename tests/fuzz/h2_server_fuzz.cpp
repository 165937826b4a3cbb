// libFuzzer: bytes as an HTTP/2 client sends them to sluice's server codec. The real h2::Session (nghttp2
// with sluice's callbacks, the abuse guard, RFC 9113 §8 validation, stream bookkeeping, the forwarder)
// reads them from one end of a socketpair; the fuzzer's client writes them into the other end in
// fuzzer-chosen pieces and reads everything the session answers; once the session's exchanges ended (or it
// waits on the client) the client half-closes. What the session forwards
// goes to a stub app (stub_app.h) that answers at once; a health check's readiness probe connects to a
// listener of its own. Every input must end the session: anything still
// running after kLimit is a hang (abort), and whatever an input allocated is freed when it ends.
//
// The first byte steers: bits 0-3 the piece size (2^n bytes), bit 4 prepends the client connection preface
// (so that mutations reach the frames; without it the input must carry its own), bit 5 hands the first
// piece to the session as bytes already read (what the protocol sniffer passes on), bit 6 makes the
// connection an h2c upgrade (RFC 7540 §3.2): then the next byte n and n % 37 bytes after it are the
// HTTP2-Settings payload, and stream 1 is a GET of /upgrade, half-closed already; bit 7 sets tight limits
// (header list, field count, body, streams, reset and control-frame budgets) that short inputs can exceed.
#include <sys/socket.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "common/log.h"
#include "proxy/downstream/h2_handover.h"
#include "proxy/downstream/h2_session.h"
#include "proxy/forward/shared_state.h"
#include "proxy/downstream/context.h"
#include "proxy/forward/context.h"
#include "tests/fuzz/stub_app.h"

namespace {

using namespace sluice::proxy;
using namespace std::chrono_literals;

constexpr auto kLimit = 5s;

bool trace = false;  // SLUICE_FUZZ_TRACE=1: a line per input (to check what a seed reaches)

void discard_line(std::string&) {}

// The frames of what came back, as "type:flags:stream" (for the trace).
std::string frame_list(std::string_view b) {
  std::string out;
  while (b.size() >= 9) {
    const auto* f = reinterpret_cast<const std::uint8_t*>(b.data());
    const std::size_t length = (std::size_t{f[0]} << 16) | (std::size_t{f[1]} << 8) | f[2];
    const std::uint32_t stream = ((f[5] & 0x7fu) << 24) | (f[6] << 16) | (f[7] << 8) | f[8];
    out += std::to_string(f[3]) + ":" + std::to_string(f[4]) + ":" + std::to_string(stream);
    if (f[3] == 3 && length == 4 && b.size() >= 13) out += "(" + std::to_string(f[12]) + ")";  // RST_STREAM code
    if (f[3] == 7 && length >= 8 && b.size() >= 17) out += "(" + std::to_string(f[16]) + ")";  // GOAWAY code
    out += " ";
    b.remove_prefix(std::min(b.size(), 9 + length));
  }
  return out;
}

asio::awaitable<void> read_all(tcp::socket& s, std::string& got) {
  char buf[16 * 1024];
  while (true) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_nothrow);
    if (trace) got.append(buf, n);
    if (ec) co_return;  // the session closed its end
  }
}

asio::awaitable<void> write_all(tcp::socket& s, std::string_view input, std::size_t piece) {
  while (!input.empty()) {
    auto n = std::min(piece, input.size());
    auto [ec, written] = co_await asio::async_write(s, asio::buffer(input.data(), n), use_nothrow);
    (void)written;
    if (ec) break;  // the session closed the connection
    input.remove_prefix(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::signal(SIGPIPE, SIG_IGN);
  trace = std::getenv("SLUICE_FUZZ_TRACE") != nullptr;
  sluice::log::set_sink(&discard_line);  // the lines are still built (they carry client bytes), not printed
  return 0;
}

static int test_one_input(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = std::size_t{1} << (data[0] & 0x0f);
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::unique_ptr<h2::UpgradeRequest> upgrade;
  if ((data[0] & 0x40) && !rest.empty()) {
    const std::size_t n = std::min<std::size_t>(static_cast<std::uint8_t>(rest[0]) % 37, rest.size() - 1);
    upgrade = std::make_unique<h2::UpgradeRequest>();
    upgrade->settings = rest.substr(1, n);
    upgrade->request.method(http::verb::get);
    upgrade->request.target("/upgrade");
    upgrade->request.set(http::field::host, "app.example");
    rest.remove_prefix(1 + n);
  }
  std::string input;
  if (data[0] & 0x10) input = h2::kClientPreface;
  input.append(rest);
  std::string initial;
  if (data[0] & 0x20) {
    initial = input.substr(0, piece);
    input.erase(0, initial.size());
  }

  asio::io_context io;
  // Health checks (K-Network-Probe) probe the app's port once: a listener of this input's, which the
  // kernel completes connections to without anyone accepting them.
  tcp::acceptor app_port(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ProxyConfig config;
  config.readiness.port = app_port.local_endpoint().port();
  config.readiness.period = 1s;  // one try, not Knative's 10 s of polling
  if (data[0] & 0x80) {
    config.limits.max_header_bytes = 512;
    config.limits.max_header_count = 8;
    config.limits.max_body_bytes = 64;
    config.limits.h2.max_concurrent_streams = 3;
    config.limits.h2.reset_burst = 4;
    config.limits.h2.control_burst = 8;
    config.limits.h2.max_continuations = 2;
    config.limits.h2.max_settings = 4;
  }
  SharedState shared(config, 1);
  sluice::net::Watchdogs watchdogs(io.get_executor());
  fuzz::StubConnector app;
  ForwardContext forwarder(config, shared, 0, io.get_executor(), watchdogs, app,
                           tcp::endpoint(asio::ip::make_address("127.0.0.1"), 1));
  ServerContext worker(config, forwarder, watchdogs);

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  tcp::socket server_end(io), client_end(io);
  server_end.assign(tcp::v4(), fds[0]);
  client_end.assign(tcp::v4(), fds[1]);

  bool session_done = false, client_done = false, written = false;
  h2::Session* session = nullptr;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    h2::Session s(worker, Downstream(std::move(server_end)), PeerName{.address = "192.0.2.1", .peer = "192.0.2.1:40000"});
    session = &s;
    co_await s.run(initial, upgrade);
    session = nullptr;
  }, [&](std::exception_ptr e) {
    if (e) std::abort();  // the session lets nothing escape
    session_done = true;
  });
  std::string received;
  asio::co_spawn(io, read_all(client_end, received), [&](std::exception_ptr e) {
    if (e) std::abort();
    client_done = true;
  });
  asio::co_spawn(io, write_all(client_end, input, piece), [&](std::exception_ptr e) {
    if (e) std::abort();
    written = true;
  });
  const auto deadline = Clock::now() + kLimit;
  // The client stays until the session has taken in everything and its exchanges ended (a health check
  // probes, a response may wait for the client's window): then it half-closes. A session that has not
  // moved for 1 ms waits for the client, which then leaves too.
  while (!session_done && Clock::now() < deadline) {
    while (io.poll() > 0) {
    }
    if (written && (!session || session->exchanges_running() == 0)) break;
    if (io.run_one_for(1ms) == 0 && written) break;
  }
  error_code ignore;
  client_end.shutdown(tcp::socket::shutdown_send, ignore);
  // Until nothing is left to run: the session, its streams and the client ended.
  while (!io.stopped() && Clock::now() < deadline) io.run_one_for(kLimit);
  if (!io.stopped() || !session_done || !client_done) {
    std::fprintf(stderr, "h2_server_fuzz: still running after %lld s (session %d, client %d)\n",
                 static_cast<long long>(kLimit.count()), session_done, client_done);
    std::abort();
  }
  if (trace)
    std::fprintf(stderr, "h2_server_fuzz: %zu requests forwarded; back: %s\n", app.opened,
                 frame_list(received).c_str());
  return 0;
}

// GCC names a lambda inside an extern "C" function after the function alone, and a coroutine lambda's
// name then comes out twice (the assembler refuses the file): the body is a C++ function.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return test_one_input(data, size); }
