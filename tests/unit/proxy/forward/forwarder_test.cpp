// The forwarder's policy table with fake codecs on both sides: for every protocol pair (an HTTP/1.1-like
// or HTTP/2-like client side, an HTTP/1.1 or h2c app side) the same retry rule, deadlines, status mapping
// and 499 for a client that leaves.
#include "proxy/forward/forwarder.h"

#include <gtest/gtest.h>

#include <array>
#include <csignal>
#include <deque>
#include <thread>

#include "proxy/forward/failure.h"
#include "proxy/forward/shared_state.h"
#include "proxy/downstream/context.h"
#include "proxy/forward/context.h"

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

// The client's side. `h2_like`: a refusal mid-body resets the exchange instead of answering, and the
// response is taken at once (the *_now forms) instead of through the awaitable ones.
class FakeServer final : public ServerExchange {
 public:
  FakeServer(const asio::any_io_executor& ex, bool h2_like, std::string method = "GET",
             std::vector<std::string> chunks = {})
      : h2_like_(h2_like), body_(std::move(chunks)), wake_(ex, Clock::time_point::max()) {
    req_.method_string(method);
    req_.target("/x");
    req_.version(11);
    req_.set(http::field::host, "app.example");
    req_.set(http::field::connection, "keep-alive, x-hop");
    req_.set("X-Hop", "drop me");
    record.start = Clock::now();
    if (!body_.empty()) info_ = {.kind = BodyKind::unknown};
  }

  http::request_header<>& request() override { return req_; }
  BodyInfo request_body() const override { return info_; }
  std::string_view peer_address() const override { return "192.0.2.7"; }
  bool is_tls() const override { return false; }
  asio::awaitable<BodyRead> read_body() override {
    if (next_ < body_.size()) co_return BodyRead{error_code{}, asio::buffer(body_[next_])};
    if (body_error_) co_return BodyRead{body_error_, {}};
    if (hold_body_) {  // a client that never sends the rest
      co_await wake_.async_wait(use_nothrow);
      co_return BodyRead{asio::error::operation_aborted, {}};
    }
    co_return BodyRead{};
  }
  void consume_body(std::size_t) override { ++next_; }
  std::optional<asio::const_buffer> body_in_hand() override {
    if (in_hand_.empty()) return std::nullopt;
    return asio::buffer(in_hand_);
  }
  FieldList request_trailers() override { return {{"x-req-trailer", "1"}}; }
  asio::awaitable<error_code> send_interim(const http::response_header<>& head) override {
    interims.push_back(head.result_int());
    co_return error_code{};
  }
  asio::awaitable<error_code> send_head(const http::response_header<>& head, BodyInfo, bool) override {
    took(head);
    co_return error_code{};
  }
  asio::awaitable<error_code> write_body(asio::const_buffer data) override {
    body.append(static_cast<const char*>(data.data()), data.size());
    co_return error_code{};
  }
  asio::awaitable<error_code> end_body(const FieldList& t) override {
    trailers = t;
    ended = true;
    co_return error_code{};
  }
  void took(const http::response_header<>& head) {
    status = head.result_int();
    for (const auto& f : head) head_fields.emplace_back(f.name_string(), f.value());
  }
  // An HTTP/2-like side takes the response at once, as an h2 stream with room in its send queue does.
  bool send_head_now(const http::response_header<>& head, BodyInfo, bool, error_code& ec) override {
    if (!h2_like_) return false;
    took(head);
    ec = {};
    return true;
  }
  bool write_body_now(asio::const_buffer data, error_code& ec) override {
    if (!h2_like_) return false;
    body.append(static_cast<const char*>(data.data()), data.size());
    ec = {};
    return true;
  }
  bool end_body_now(const FieldList& t, error_code& ec) override {
    if (!h2_like_) return false;
    trailers = t;
    ended = true;
    ec = {};
    return true;
  }
  asio::awaitable<void> send_local(const LocalAnswer& a) override {
    local = a;
    co_return;
  }
  void abort() override { aborted = true; }
  asio::awaitable<void> tunnel(tcp::socket&, beast::flat_buffer&, Clock::time_point&) override { co_return; }
  bool is_flushed() const override { return true; }
  asio::awaitable<void> flushed() override { co_return; }
  void cancel_io() override { wake_.cancel(); }
  void stop_reading() override { wake_.cancel(); }
  bool answers_mid_body() const override { return !h2_like_; }

  void hold_body() { hold_body_ = true; }
  // The body's framing breaks after the pieces given (a bad chunk, a cut connection).
  void fail_body(error_code ec) { body_error_ = ec; }
  // The whole body of a declared length came with the head (a small upload).
  void whole_body(std::string bytes) {
    info_ = {.kind = BodyKind::length, .content_length = bytes.size()};
    in_hand_ = std::move(bytes);
  }
  // Splicing: the request body's `n` bytes come from `in`; the response may go to `out`.
  void splice_request(tcp::socket& in, std::uint64_t n) {
    raw_in_ = &in;
    raw_remaining_ = n;
    info_ = {.kind = BodyKind::length, .content_length = n};
  }
  void splice_response_to(tcp::socket& out) { raw_out_ = &out; }
  RawBody raw_body_in() override {
    if (!raw_in_ || raw_remaining_ == 0) return {};
    return {.socket = raw_in_, .remaining = raw_remaining_};
  }
  void raw_body_taken(std::size_t n) override {
    raw_remaining_ -= n;
    raw_taken += n;
  }
  tcp::socket* raw_body_out() override { return raw_out_; }
  std::uint64_t raw_taken = 0;  // spliced request bytes the forwarder reported

  // What the client got.
  std::vector<unsigned> interims;
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> head_fields;  // of the final head
  std::string body;
  FieldList trailers;
  bool ended = false;
  std::optional<LocalAnswer> local;
  bool aborted = false;

 private:
  bool h2_like_;
  http::request_header<> req_;
  BodyInfo info_;
  std::vector<std::string> body_;
  std::size_t next_ = 0;
  bool hold_body_ = false;
  error_code body_error_;
  std::string in_hand_;
  asio::steady_timer wake_;
  tcp::socket* raw_in_ = nullptr;
  std::uint64_t raw_remaining_ = 0;
  tcp::socket* raw_out_ = nullptr;
};

// The app's side of one attempt, scripted.
struct Script {
  error_code head_error;            // read_head fails with this (after the request went out)
  bool hang = false;                // read_head waits until cancelled
  std::vector<unsigned> statuses{200};  // interim ones first
  std::vector<std::string> body{"hello"};
  FieldList head_fields;            // on every head, as the app's codec read them
  FieldList trailers{{"grpc-status", "0"}};
  Staleness stale = Staleness::fresh;
  bool head_after_body = false;     // read_head waits until the request body has ended
  bool knows_its_end = false;       // body_ended() says so after the last piece (else read_body does)
  bool hang_after_body = false;     // after the pieces, read_body waits until cancelled (a stalled app)
  // Splicing: the request body may go to `raw_out`; the response body (its length `raw_length`) comes
  // from `raw_in` instead of `body`.
  tcp::socket* raw_out = nullptr;
  tcp::socket* raw_in = nullptr;
  std::uint64_t raw_length = 0;
};

struct Seen {
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  FieldList trailers;
  bool cancelled = false;
  bool released = false;
  bool ended = false;           // end_body came
  int body_reads = 0;           // read_body calls
  std::uint64_t raw_taken = 0;  // spliced response bytes the forwarder reported
};

class FakeClient final : public ClientExchange {
 public:
  // `reads_at_once`: body pieces at hand are given by read_body_now (as both real upstream codecs do).
  FakeClient(const asio::any_io_executor& ex, Script s, Seen& seen, bool reads_at_once)
      : script_(std::move(s)),
        seen_(seen),
        wake_(ex, Clock::time_point::max()),
        raw_remaining_(script_.raw_length),
        reads_at_once_(reads_at_once) {}

  asio::awaitable<error_code> send_head(const UpstreamRequest& r, std::optional<asio::const_buffer> body) override {
    struct Sink final : FieldSink {
      Seen& seen;
      explicit Sink(Seen& s) : seen(s) {}
      void field(std::string_view n, std::string_view v) override { seen.fields.emplace_back(n, v); }
    } sink(seen_);
    r.fields(sink);
    if (body) seen_.body.append(static_cast<const char*>(body->data()), body->size());
    co_return error_code{};
  }
  asio::awaitable<error_code> write_body(asio::const_buffer data) override {
    seen_.body.append(static_cast<const char*>(data.data()), data.size());
    co_return error_code{};
  }
  asio::awaitable<error_code> end_body(const FieldList& t) override {
    seen_.trailers = t;
    seen_.ended = true;
    wake_.cancel();
    co_return error_code{};
  }
  tcp::socket* raw_body_out() override { return seen_.ended ? nullptr : script_.raw_out; }
  asio::awaitable<std::tuple<error_code, http::response_header<>*>> read_head() override {
    if (script_.head_after_body && !seen_.ended) {
      if (!seen_.cancelled) co_await wake_.async_wait(use_nothrow);
      if (!seen_.ended) co_return std::tuple{error_code(asio::error::operation_aborted), nullptr};
    }
    if (script_.hang) {
      if (!seen_.cancelled) co_await wake_.async_wait(use_nothrow);
      co_return std::tuple{error_code(asio::error::operation_aborted), nullptr};
    }
    if (script_.head_error) co_return std::tuple{script_.head_error, nullptr};
    head_ = {};
    head_.result(script_.statuses[next_head_++]);
    for (const auto& [name, value] : script_.head_fields) head_.insert(name, value);
    co_return std::tuple{error_code{}, &head_};
  }
  BodyInfo response_body() const override {
    if (script_.raw_in) return {.kind = BodyKind::length, .content_length = script_.raw_length};
    return {.kind = BodyKind::unknown};
  }
  RawBody raw_body_in() override {
    if (!script_.raw_in || raw_remaining_ == 0) return {};
    return {.socket = script_.raw_in, .remaining = raw_remaining_};
  }
  void raw_body_taken(std::size_t n) override {
    raw_remaining_ -= n;
    seen_.raw_taken += n;
  }
  bool body_at_hand() const override { return false; }
  asio::awaitable<BodyRead> read_body() override {
    ++seen_.body_reads;
    if (script_.raw_in) {  // a body the codec could splice, read through it instead (as the real one does)
      if (raw_remaining_ == 0) co_return BodyRead{};
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(raw_remaining_, raw_piece_.size()));
      auto [ec, n] = co_await script_.raw_in->async_read_some(asio::buffer(raw_piece_.data(), want), use_nothrow);
      if (ec) co_return BodyRead{ec == asio::error::eof ? error_code(http::error::partial_message) : ec, {}};
      raw_remaining_ -= n;
      co_return BodyRead{error_code{}, asio::buffer(raw_piece_.data(), n)};
    }
    if (next_ < script_.body.size()) co_return BodyRead{error_code{}, asio::buffer(script_.body[next_])};
    if (script_.hang_after_body) {
      if (!seen_.cancelled) co_await wake_.async_wait(use_nothrow);
      co_return BodyRead{asio::error::operation_aborted, {}};
    }
    co_return BodyRead{};
  }
  bool read_body_now(BodyRead& out) override {
    if (!reads_at_once_ || script_.raw_in) return false;
    if (next_ >= script_.body.size() && script_.hang_after_body) return false;
    ++seen_.body_reads;
    out = next_ < script_.body.size() ? BodyRead{error_code{}, asio::buffer(script_.body[next_])} : BodyRead{};
    return true;
  }
  void consume_body(std::size_t) override { ++next_; }
  bool body_ended() const override { return script_.knows_its_end && !script_.raw_in && next_ >= script_.body.size(); }
  const FieldList& trailers() override { return script_.trailers; }
  void cancel() override {
    seen_.cancelled = true;
    wake_.cancel();
  }
  Staleness stale() const override { return script_.stale; }
  void release(std::unique_ptr<ClientExchange> self) override {
    seen_.released = true;
    self.reset();
  }
  tcp::socket* tunnel_socket(beast::flat_buffer*&) override { return nullptr; }

 private:
  Script script_;
  Seen& seen_;
  http::response_header<> head_;
  std::size_t next_head_ = 0, next_ = 0;
  asio::steady_timer wake_;
  std::uint64_t raw_remaining_;
  std::array<char, 16 * 1024> raw_piece_{};  // a piece of a spliceable body read through the codec
  bool reads_at_once_;
};

class FakeConnector final : public Connector {
 public:
  explicit FakeConnector(const asio::any_io_executor& ex) : ex_(ex) {}
  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientExchange>>> open(AppProtocol p, const tcp::endpoint*,
                                                                               bool verify) override {
    ++opened;
    protocols.push_back(p);
    verified.push_back(verify);
    if (connect_error) co_return std::tuple{connect_error, nullptr};
    co_return std::tuple{error_code{}, next_exchange()};
  }
  // With `pooled` set, every exchange is on a connection that is ready at once, as a warm pool's.
  std::unique_ptr<ClientExchange> reuse(AppProtocol p, const tcp::endpoint*, bool verify) override {
    if (!pooled) return nullptr;
    protocols.push_back(p);
    verified.push_back(verify);
    return next_exchange();
  }

  std::deque<Script> scripts;
  error_code connect_error;
  bool pooled = false;
  bool reads_at_once = false;  // the exchanges give body pieces at hand through read_body_now
  int opened = 0;  // calls of open()
  std::vector<AppProtocol> protocols;
  std::vector<bool> verified;
  std::deque<Seen> seen_list;

 private:
  std::unique_ptr<ClientExchange> next_exchange() {
    auto& seen = seen_list.emplace_back();
    Script s = scripts.empty() ? Script{} : scripts.front();
    if (!scripts.empty()) scripts.pop_front();
    return std::make_unique<FakeClient>(ex_, std::move(s), seen, reads_at_once);
  }

  asio::any_io_executor ex_;
};

// Runs one exchange through the forwarder on a one-worker context whose app side is `connector`;
// whether it ended within `limit`.
bool run_exchange(asio::io_context& io, const ProxyConfig& config, Connector& connector, ServerExchange& server,
                  std::chrono::milliseconds limit) {
  SharedState shared(config, 1);
  net::Watchdogs watchdogs(io.get_executor());
  ForwardContext worker(config, shared, 0, io.get_executor(), watchdogs, connector,
                        tcp::endpoint(asio::ip::make_address("127.0.0.1"), 1));
  bool done = false;
  io.restart();  // a test may run several exchanges on one io_context
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await forward(worker, server);
    done = true;
  }, asio::detached);
  io.run_for(limit);
  return done;
}

// One protocol pair: the client side is HTTP/2-like or not, the app speaks h2c or HTTP/1.1.
struct Pair {
  bool h2_client;
  bool h2c_app;
};

class ForwarderPolicy : public ::testing::TestWithParam<Pair> {
 protected:
  ForwarderPolicy() {
    config.upstream_protocol = GetParam().h2c_app ? ProxyConfig::UpstreamProtocol::h2c : ProxyConfig::UpstreamProtocol::http1;
    connector.reads_at_once = GetParam().h2c_app;  // the other pairs read through the awaitable form
  }
  // The staleness the app side reports for a connection it had closed, as each upstream codec does.
  Staleness stale_kind() const { return GetParam().h2c_app ? Staleness::unprocessed : Staleness::maybe_processed; }

  // Runs one exchange to its end with the app side scripted.
  void run(FakeServer& server, std::chrono::milliseconds limit = 2s) {
    ASSERT_TRUE(run_exchange(io, config, connector, server, limit)) << "the exchange did not end";
  }
  FakeServer server(std::string method = "GET", std::vector<std::string> body = {}) {
    return FakeServer(io.get_executor(), GetParam().h2_client, std::move(method), std::move(body));
  }

  asio::io_context io;
  ProxyConfig config;
  FakeConnector connector{io.get_executor()};
};

TEST_P(ForwarderPolicy, RelaysHeadBodyAndTrailersBothWaysWithTheHeaderPolicy) {
  auto s = server("POST", {"ab", "cd"});
  connector.scripts.push_back({.statuses = {100, 103, 200}});
  run(s);
  ASSERT_EQ(connector.protocols.size(), 1u);
  EXPECT_EQ(connector.protocols[0], GetParam().h2c_app ? AppProtocol::h2c : AppProtocol::http1);
  const auto& seen = connector.seen_list.front();
  EXPECT_EQ(seen.body, "abcd");
  EXPECT_EQ(seen.trailers, (FieldList{{"x-req-trailer", "1"}}));
  auto has = [&](std::string_view name) {
    for (const auto& [n, v] : seen.fields)
      if (iequals(n, name)) return true;
    return false;
  };
  EXPECT_TRUE(has("Host"));
  EXPECT_TRUE(has("X-Forwarded-For"));
  EXPECT_TRUE(has("X-Request-Id"));
  EXPECT_FALSE(has("X-Hop"));       // named in Connection: stops at this hop
  EXPECT_FALSE(has("Connection"));
  // Every interim answer is passed on, the app's unasked 100 too (RFC 9110 §15.2; queue-proxy passes it).
  EXPECT_EQ(s.interims, (std::vector<unsigned>{100, 103}));
  EXPECT_EQ(s.status, 200u);
  EXPECT_EQ(s.body, "hello");
  EXPECT_EQ(s.trailers, (FieldList{{"grpc-status", "0"}}));
  EXPECT_TRUE(s.ended);
  EXPECT_EQ(s.record.status, 200);
  EXPECT_EQ(s.record.request_bytes, 4u);
  EXPECT_EQ(s.record.response_bytes, 5u);
}

TEST_P(ForwarderPolicy, AResponsesHopByHopFieldsStopHereWhateverProtocolEachSideSpeaks) {
  // An app's codec passes on whatever the app sent (HTTP/1.1 apps may name fields in Connection); the
  // forwarder's policy, not the downstream codec, removes them: the fake client side writes what it gets.
  auto s = server();
  connector.scripts.push_back({.head_fields = {{"Connection", "keep-alive, X-Hop-Secret"},
                                               {"X-Hop-Secret", "leak"},
                                               {"Keep-Alive", "timeout=5"},
                                               {"Proxy-Connection", "keep-alive"},
                                               {"Transfer-Encoding", "chunked"},
                                               {"Upgrade", "h2c"},
                                               {"Proxy-Authenticate", "Basic"},
                                               {"Content-Length", "5"},
                                               {"X-End-To-End", "kept"}}});
  run(s);
  ASSERT_EQ(s.status, 200u);
  std::vector<std::string> names;
  for (const auto& [n, v] : s.head_fields) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"Content-Length", "X-End-To-End"}));
}

TEST_P(ForwarderPolicy, AResponseBodyTheCodecKnowsHasEndedIsFinishedWithoutAnotherRead) {
  for (bool knows : {false, true}) {
    SCOPED_TRACE(knows ? "the codec knows its end" : "read_body gives the end");
    connector.seen_list.clear();
    auto s = server();
    connector.scripts.push_back({.body = {"hel", "lo"}, .knows_its_end = knows});
    run(s);
    EXPECT_EQ(s.body, "hello");
    EXPECT_EQ(s.trailers, (FieldList{{"grpc-status", "0"}}));
    EXPECT_TRUE(s.ended);
    EXPECT_EQ(s.record.response_bytes, 5u);
    EXPECT_EQ(connector.seen_list.front().body_reads, knows ? 2 : 3);
  }
}

TEST_P(ForwarderPolicy, AStaleConnectionIsRetriedOnceOnAVerifiedOneForAnIdempotentRequest) {
  auto s = server("GET");
  connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = stale_kind()});
  run(s);
  ASSERT_EQ(connector.verified.size(), 2u);
  EXPECT_TRUE(connector.verified[1]);  // the second attempt never takes an unchecked pooled connection
  EXPECT_EQ(s.status, 200u);
  EXPECT_EQ(s.body, "hello");
  EXPECT_FALSE(connector.seen_list.front().released);  // the stale one is dropped
  EXPECT_TRUE(connector.seen_list.back().released);    // the good one goes back to its pool
}

TEST_P(ForwarderPolicy, APooledConnectionIsTakenWithoutOpeningAndTheRetryRuleIsTheSame) {
  connector.pooled = true;
  auto s = server("GET");
  connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = stale_kind()});
  run(s);
  EXPECT_EQ(connector.opened, 0);
  ASSERT_EQ(connector.verified.size(), 2u);
  EXPECT_FALSE(connector.verified[0]);  // a GET without a body may go again: the first take is unchecked
  EXPECT_TRUE(connector.verified[1]);
  EXPECT_EQ(s.status, 200u);
  EXPECT_EQ(s.body, "hello");
  EXPECT_TRUE(connector.seen_list.back().released);
}

TEST_P(ForwarderPolicy, ANonIdempotentRequestIsRetriedOnlyWhenTheAppSaysItDidNotProcessIt) {
  auto s = server("POST");
  connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = stale_kind()});
  run(s);
  if (GetParam().h2c_app) {  // REFUSED_STREAM: nothing reached the app
    EXPECT_EQ(connector.verified.size(), 2u);
    EXPECT_EQ(s.status, 200u);
  } else {  // a closed keep-alive connection may have delivered it: not sent twice
    EXPECT_EQ(connector.verified.size(), 1u);
    EXPECT_TRUE(connector.verified[0]);  // so the pooled connection was checked before use
    ASSERT_TRUE(s.local);
    EXPECT_EQ(s.local->status, 502u);
  }
}

TEST_P(ForwarderPolicy, AFailureOnAWorkingConnectionIs502AndNotRetried) {
  auto s = server("GET");
  connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = Staleness::fresh});
  run(s);
  EXPECT_EQ(connector.verified.size(), 1u);
  ASSERT_TRUE(s.local);
  EXPECT_EQ(s.local->status, 502u);
  EXPECT_EQ(s.local->body, "bad gateway: upstream: " + error_code(asio::error::connection_reset).message());
  EXPECT_EQ(s.record.status, 502);
}

TEST_P(ForwarderPolicy, NoConnectionToTheAppIs502ConnectError) {
  auto s = server();
  connector.connect_error = asio::error::connection_refused;
  run(s);
  ASSERT_TRUE(s.local);
  EXPECT_EQ(s.local->status, 502u);
  EXPECT_EQ(s.local->body.rfind("bad gateway: upstream connect error: ", 0), 0u) << s.local->body;
}

TEST_P(ForwarderPolicy, TheResponseStartAndIdleDeadlinesBeforeTheResponseAre504AndCancelTheApp) {
  for (bool idle : {false, true}) {
    SCOPED_TRACE(idle ? "the idle deadline" : "the response-start deadline");
    config.timeouts = {};
    (idle ? config.timeouts.idle : config.timeouts.response_start) = 50ms;
    connector.seen_list.clear();
    auto s = server();
    connector.scripts.push_back({.hang = true});
    run(s);
    ASSERT_TRUE(s.local);
    EXPECT_EQ(s.local->status, 504u);
    EXPECT_EQ(s.local->body, "request timeout");
    // As queue-proxy's timeout handler answers: no newline, and the client's connection goes on (the
    // codec closes it still when the request's body was not read whole).
    EXPECT_TRUE(s.local->exact_body);
    EXPECT_FALSE(s.local->close);
    EXPECT_EQ(s.record.status, 504);
    EXPECT_TRUE(connector.seen_list.front().cancelled);
  }
}

TEST_P(ForwarderPolicy, TheRequestDeadlineIs504) {
  config.timeouts.request = 50ms;
  auto s = server();
  connector.scripts.push_back({.hang = true});
  run(s);
  ASSERT_TRUE(s.local);
  EXPECT_EQ(s.local->status, 504u);
}

TEST_P(ForwarderPolicy, AClientThatLeavesIs499AtOnceAndTheAppIsCancelled) {
  auto s = server();
  connector.scripts.push_back({.hang = true});
  asio::steady_timer leave(io, 20ms);
  leave.async_wait([&](error_code) { s.watcher->client_gone(); });
  auto start = Clock::now();
  run(s);
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_FALSE(s.local);  // nobody to answer
  EXPECT_TRUE(s.aborted);
  EXPECT_EQ(s.record.status, kClientClosedRequest);
  EXPECT_TRUE(connector.seen_list.front().cancelled);
}

TEST_P(ForwarderPolicy, ABodyPastTheLimitIs413OrAResetWhereAnAnswerCannotGoMidBody) {
  config.limits.max_body_bytes = 3;
  auto s = server("POST", {"ab", "cd"});
  s.hold_body();
  connector.scripts.push_back({.hang = true});
  run(s);
  EXPECT_EQ(s.record.status, 413);
  EXPECT_TRUE(connector.seen_list.front().cancelled);
  if (GetParam().h2_client) {
    EXPECT_TRUE(s.aborted);
    EXPECT_FALSE(s.local);
  } else {
    ASSERT_TRUE(s.local);
    EXPECT_EQ(s.local->status, 413u);
    EXPECT_TRUE(s.local->close);
  }
}

TEST_P(ForwarderPolicy, AStaleConnectionIsRetriedAtMostOnce) {
  auto s = server("GET");
  for (int i = 0; i < 2; ++i)
    connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = stale_kind()});
  run(s);
  EXPECT_EQ(connector.verified.size(), 2u);
  ASSERT_TRUE(s.local);
  EXPECT_EQ(s.local->status, 502u);
  EXPECT_EQ(s.record.status, 502);
}

TEST_P(ForwarderPolicy, AStreamedBodyIsNeverSentTwiceEvenForAnIdempotentMethod) {
  // Its first bytes may have reached the app and are gone from the client's side: no second attempt.
  auto s = server("PUT", {"ab", "cd"});
  connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = stale_kind(),
                               .head_after_body = true});
  run(s);
  ASSERT_EQ(connector.verified.size(), 1u);
  EXPECT_TRUE(connector.verified[0]);  // so it never takes an unchecked pooled connection
  EXPECT_EQ(connector.seen_list.front().body, "abcd");
  ASSERT_TRUE(s.local);
  EXPECT_EQ(s.local->status, 502u);
}

TEST_P(ForwarderPolicy, AWholeBodyThatCameWithTheHeadGoesAgainOnTheRetryAndCountsOnce) {
  connector.pooled = true;
  auto s = server("PUT");
  s.whole_body("payload");
  connector.scripts.push_back({.head_error = asio::error::connection_reset, .stale = stale_kind()});
  run(s);
  ASSERT_EQ(connector.seen_list.size(), 2u);
  EXPECT_FALSE(connector.verified[0]);  // replayable: the pooled connection is taken unchecked
  EXPECT_EQ(connector.seen_list[0].body, "payload");
  EXPECT_EQ(connector.seen_list[1].body, "payload");
  EXPECT_EQ(s.status, 200u);
  EXPECT_EQ(s.record.request_bytes, 7u);
}

TEST_P(ForwarderPolicy, ADeadlineAfterTheResponseStartedCutsItKeepsItsStatusAndCancelsTheApp) {
  for (bool idle : {true, false}) {
    SCOPED_TRACE(idle ? "the idle deadline" : "the request deadline");
    config.timeouts = {};
    (idle ? config.timeouts.idle : config.timeouts.request) = 100ms;
    connector.seen_list.clear();
    auto s = server();
    connector.scripts.push_back({.body = {"hel"}, .hang_after_body = true});
    run(s);
    EXPECT_EQ(s.status, 200u);
    EXPECT_EQ(s.body, "hel");
    EXPECT_TRUE(s.aborted);  // the client sees the body end early
    EXPECT_FALSE(s.ended);
    EXPECT_FALSE(s.local);
    EXPECT_EQ(s.record.status, 200);
    EXPECT_EQ(s.record.response_bytes, 3u);
    EXPECT_TRUE(connector.seen_list.front().cancelled);
    EXPECT_FALSE(connector.seen_list.front().released);
  }
}

TEST_P(ForwarderPolicy, ADeclaredLengthPastTheLimitIs413BeforeTheAppIsAsked) {
  config.limits.max_body_bytes = 3;
  auto s = server("POST");
  s.whole_body("too long");
  run(s);
  EXPECT_TRUE(connector.verified.empty());  // no connection was taken or opened
  EXPECT_EQ(connector.opened, 0);
  ASSERT_TRUE(s.local);  // nothing was read yet: an answer can go on either protocol
  EXPECT_EQ(s.local->status, 413u);
  EXPECT_EQ(s.record.status, 413);
}

TEST_P(ForwarderPolicy, ABrokenRequestBodyIs400NamingItsErrorAndTheAppIsCancelled) {
  auto s = server("POST", {"ab"});
  s.fail_body(http::error::bad_chunk);
  connector.scripts.push_back({.head_after_body = true});
  run(s);
  ASSERT_TRUE(s.local);
  EXPECT_EQ(s.local->status, 400u);
  EXPECT_EQ(s.local->body, "bad request: " + error_code(http::error::bad_chunk).message());
  EXPECT_TRUE(s.local->close);
  EXPECT_EQ(s.record.status, 400);
  EXPECT_TRUE(connector.seen_list.front().cancelled);
  EXPECT_EQ(connector.verified.size(), 1u);  // not retried
}

TEST_P(ForwarderPolicy, AClientThatLeavesMidBodyIs499AndTheAppIsCancelled) {
  auto s = server("POST", {"ab"});
  s.hold_body();
  connector.scripts.push_back({.head_after_body = true});
  asio::steady_timer leave(io, 20ms);
  leave.async_wait([&](error_code) { s.watcher->client_gone(); });
  run(s);
  EXPECT_FALSE(s.local);
  EXPECT_TRUE(s.aborted);
  EXPECT_EQ(s.record.status, kClientClosedRequest);
  EXPECT_EQ(s.record.request_bytes, 2u);
  EXPECT_TRUE(connector.seen_list.front().cancelled);
  EXPECT_FALSE(connector.seen_list.front().released);
}

// Bodies the codecs offer to splice (HTTP/1.1 on both sides, Content-Length): real loopback sockets stand
// for the client's and the app's connections. The same rules hold as for copied bodies: bytes counted,
// the codecs told what moved, a client leaving mid-body is 499 with the app cancelled, an app cutting
// the response short cuts the client's.
struct Link {
  explicit Link(asio::io_context& io) : near(io), far(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    far.connect(acceptor.local_endpoint());
    acceptor.accept(near);
  }
  tcp::socket near, far;  // the proxy's end, the peer's end
};

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 1000) % 26);
  return s;
}

class ForwarderSplice : public ::testing::Test {
 protected:
  ForwarderSplice() : client(io), app(io) {
    std::signal(SIGPIPE, SIG_IGN);
    config.upstream_protocol = ProxyConfig::UpstreamProtocol::http1;
  }
  void run(FakeServer& s) { ASSERT_TRUE(run_exchange(io, config, connector, s, 10s)) << "the exchange did not end"; }
  // A peer that writes `bytes` and then closes its end, on a thread of its own.
  std::thread write_then_close(tcp::socket& peer, std::string bytes) {
    return std::thread([&peer, b = std::move(bytes)] {
      error_code ec;
      asio::write(peer, asio::buffer(b), ec);
      peer.close(ec);
    });
  }
  // A peer that reads until the connection ends (or `n` bytes came), on a thread of its own.
  std::thread read_into(tcp::socket& peer, std::string& got, std::size_t n) {
    return std::thread([&peer, &got, n] {
      std::vector<char> chunk(64 * 1024);
      while (got.size() < n) {
        error_code ec;
        std::size_t k = peer.read_some(asio::buffer(chunk), ec);
        if (ec) break;
        got.append(chunk.data(), k);
      }
    });
  }

  asio::io_context io;
  ProxyConfig config;
  FakeConnector connector{io.get_executor()};
  Link client, app;
};

// A typed response: an untyped one would have its first piece read through the codec to name its type.
const FieldList kTyped{{"Content-Type", "application/octet-stream"}};

TEST_F(ForwarderSplice, ASplicedRequestBodyReachesTheAppCountedAndTheCodecIsTold) {
  const std::string body = pattern(300 * 1000);
  FakeServer s(io.get_executor(), false, "POST");
  s.splice_request(client.near, body.size());
  connector.scripts.push_back({.head_after_body = true, .raw_out = &app.near});
  std::string got;
  auto writer = write_then_close(client.far, body);
  auto reader = read_into(app.far, got, body.size());
  run(s);
  writer.join();
  reader.join();
  EXPECT_TRUE(got == body) << "the app got " << got.size() << " bytes";
  EXPECT_EQ(s.raw_taken, body.size());
  EXPECT_EQ(s.record.request_bytes, body.size());
  EXPECT_TRUE(connector.seen_list.front().ended);
  EXPECT_EQ(s.status, 200u);
  EXPECT_EQ(s.body, "hello");
  EXPECT_TRUE(connector.seen_list.front().released);
}

TEST_F(ForwarderSplice, AClientLeavingMidSplicedBodyIs499AndTheAppIsCancelled) {
  FakeServer s(io.get_executor(), false, "POST");
  s.splice_request(client.near, 1 << 20);
  connector.scripts.push_back({.head_after_body = true, .raw_out = &app.near});
  std::string got;
  auto writer = write_then_close(client.far, pattern(50 * 1000));
  auto reader = read_into(app.far, got, 50 * 1000);
  run(s);
  writer.join();
  reader.join();
  EXPECT_EQ(got.size(), 50u * 1000);
  EXPECT_EQ(s.record.status, kClientClosedRequest);
  EXPECT_EQ(s.record.request_bytes, 50u * 1000);
  EXPECT_TRUE(s.aborted);
  EXPECT_FALSE(s.local);
  EXPECT_TRUE(connector.seen_list.front().cancelled);
  EXPECT_FALSE(connector.seen_list.front().released);
}

TEST_F(ForwarderSplice, ASplicedResponseBodyReachesTheClientCounted) {
  config.splice_responses = true;
  const std::string body = pattern(300 * 1000);
  FakeServer s(io.get_executor(), false, "GET");
  s.splice_response_to(client.near);
  connector.scripts.push_back({.head_fields = kTyped, .raw_in = &app.near, .raw_length = body.size()});
  std::string got;
  auto writer = write_then_close(app.far, body);
  auto reader = read_into(client.far, got, body.size());
  run(s);
  writer.join();
  reader.join();
  EXPECT_TRUE(got == body) << "the client got " << got.size() << " bytes";
  EXPECT_EQ(connector.seen_list.front().raw_taken, body.size());
  EXPECT_EQ(s.record.response_bytes, body.size());
  EXPECT_EQ(s.status, 200u);
  EXPECT_TRUE(s.ended);
  EXPECT_FALSE(s.aborted);
}

TEST_F(ForwarderSplice, AnAppCuttingASplicedResponseShortCutsTheClientsAndKeepsItsStatus) {
  config.splice_responses = true;
  FakeServer s(io.get_executor(), false, "GET");
  s.splice_response_to(client.near);
  connector.scripts.push_back({.head_fields = kTyped, .raw_in = &app.near, .raw_length = 1 << 20});
  std::string got;
  auto writer = write_then_close(app.far, pattern(40 * 1000));
  auto reader = read_into(client.far, got, 40 * 1000);
  run(s);
  writer.join();
  reader.join();
  EXPECT_EQ(got.size(), 40u * 1000);
  EXPECT_EQ(s.record.status, 200);
  EXPECT_EQ(s.record.response_bytes, 40u * 1000);
  EXPECT_TRUE(s.aborted);
  EXPECT_FALSE(s.ended);
  EXPECT_FALSE(connector.seen_list.front().released);
}

// Unless SLUICE_SPLICE_RESPONSES is on, a response body both codecs could splice is copied (its bytes read
// from the app's socket through the codec), while a request body still is spliced.
TEST_F(ForwarderSplice, ByDefaultAResponseIsCopiedWhereARequestWouldBeSpliced) {
  const std::string body = pattern(300 * 1000);
  FakeServer s(io.get_executor(), false, "GET");
  s.splice_response_to(client.near);
  connector.scripts.push_back({.head_fields = kTyped, .raw_in = &app.near, .raw_length = body.size()});
  auto writer = write_then_close(app.far, body);
  run(s);
  writer.join();
  EXPECT_TRUE(s.body == body) << "the client got " << s.body.size() << " bytes through the codec";
  EXPECT_EQ(connector.seen_list.front().raw_taken, 0u);
  EXPECT_EQ(s.record.response_bytes, body.size());
  EXPECT_TRUE(s.ended);
}

TEST_F(ForwarderSplice, WithSplicingOffTheCodecsAreNeverAskedToSplice) {
  config.splice_min_bytes = 0;
  FakeServer s(io.get_executor(), false, "POST");
  s.splice_request(client.near, 1000);
  connector.scripts.push_back({.head_after_body = true, .raw_out = &app.near});
  client.far.close();
  run(s);
  EXPECT_EQ(s.raw_taken, 0u);  // read_body was used instead (here: the fake's empty body)
}

INSTANTIATE_TEST_SUITE_P(EveryProtocolPair, ForwarderPolicy,
                         ::testing::Values(Pair{false, false}, Pair{false, true}, Pair{true, false}, Pair{true, true}),
                         [](const auto& pair) {
                           return std::string(pair.param.h2_client ? "H2" : "H1") + "To" +
                                  (pair.param.h2c_app ? "H2c" : "H1");
                         });

}  // namespace
}  // namespace sluice::proxy
