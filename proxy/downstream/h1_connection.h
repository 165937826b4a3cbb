// The HTTP/1.1 server codec: one downstream connection. It reads requests in order (keep-alive,
// pipelining), presents each as a ServerExchange to the forwarder, and writes the response in HTTP/1.1
// framing. It answers what only HTTP/1.1 has (malformed heads, `Expect: 100-continue`, `Upgrade: h2c`);
// everything else is the forwarder's.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/thread_cache.h"
#include "common/watchdog.h"
#include "proxy/codec/h1/message.h"
#include "proxy/codec/h1/scratch.h"
#include "proxy/downstream/context.h"
#include "proxy/downstream/h2_handover.h"
#include "proxy/exchange/exchange.h"
#include "proxy/exchange/peer.h"
#include "proxy/io/notifier.h"

namespace sluice::proxy::h1 {

class Connection;

// An HTTP/1.1 connection as it lasts from request to request: the socket, its read buffer, the client's
// name, the deadlines between requests, and the watch that waits for the next bytes. While requests
// arrive, a Connection (the codec, run by a coroutine) serves it. Between requests a cleartext connection
// rests: the Connection and its coroutine frames are gone and the link waits for the next bytes with one
// wait for readability, holding no buffer (as nginx's keep-alive connections do), so that an idle
// connection costs this object, that wait and the kernel's socket (and over TLS OpenSSL's session). The
// bytes start a new Connection.
class Link final : private net::Watchdog::Target, public ConnectionHandle, public std::enable_shared_from_this<Link> {
 public:
  Link(ServerContext& worker, Downstream socket, std::string_view initial_bytes);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  void close_when_idle() override;

 private:
  friend class Connection;
  friend asio::awaitable<bool> serve(ServerContext&, std::shared_ptr<Link>);
  friend asio::awaitable<bool> serve(ServerContext&, Downstream&, const std::string&);

  // Waiting for a request head (until the header or keep-alive deadline, which then cancels the read or
  // the watch), or serving an exchange (its deadlines are the forwarder's), or done.
  enum class Phase { awaiting_head, head_timed_out, exchange, closing };
  void await_head();  // an exchange ended: the next head's wait starts now

  // The watch: a read that tells when the client goes away mid-exchange, and that becomes the first read
  // of the next request when it brings bytes instead.
  void watch();
  void wait(tcp::socket::wait_type want);  // after read_now()'s EAGAIN, for what it wants
  void watched(error_code ec, std::size_t n);
  // The buffer a woken watch reads into: most request heads fit, larger ones grow it as they are read; and
  // it is a block the per-thread free lists serve (memory::kLargestCachedBlock), not malloc.
  static constexpr std::size_t kWatchReadBytes = memory::kLargestCachedBlock;
  // The watch ended while the link rests: the next request's Connection starts, or the connection ends.
  void wake();

  Clock::time_point next_deadline() const override;
  void on_deadline() override;

  ServerContext& worker_;
  Downstream down_;
  beast::flat_buffer buffer_;
  PeerName peer_;
  net::Watchdog watchdog_;  // header and keep-alive deadlines (the forwarder keeps the exchange's)
  Phase phase_ = Phase::awaiting_head;
  Clock::time_point phase_start_;
  Clock::time_point close_idle_at_ = Clock::time_point::max();  // set at shutdown
  bool watching_ = false;
  error_code watch_result_;
  Connection* codec_ = nullptr;  // serving the connection now; null while it rests
};

class Connection final : public ServerExchange {
 public:
  explicit Connection(std::shared_ptr<Link> link);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // How run() ended: the connection closed, or handed over (the client upgraded to h2c), or resting.
  enum class End { closed, h2c, rest };
  asio::awaitable<End> run();

  // ServerExchange: the request being served.
  http::request_header<>& request() override { return parser_->get().base(); }
  BodyInfo request_body() const override { return body_info_; }
  std::string_view peer_address() const override { return peer_.address; }
  bool is_tls() const override { return down_.is_tls(); }
  asio::awaitable<BodyRead> read_body() override;
  void consume_body(std::size_t n) override;
  std::optional<asio::const_buffer> body_in_hand() override;
  FieldList request_trailers() override;
  RawBody raw_body_in() override;
  void raw_body_taken(std::size_t n) override;
  asio::awaitable<error_code> send_interim(const http::response_header<>& head) override;
  asio::awaitable<error_code> send_head(const http::response_header<>& head, BodyInfo body, bool more_soon) override;
  asio::awaitable<error_code> write_body(asio::const_buffer data) override;
  asio::awaitable<error_code> end_body(const FieldList& trailers) override;
  tcp::socket* raw_body_out() override;
  asio::awaitable<void> send_local(const LocalAnswer& answer) override;
  void abort() override { response_ = Response::aborted; }
  asio::awaitable<void> tunnel(tcp::socket& app, beast::flat_buffer& app_read,
                               Clock::time_point& last_activity) override;
  bool is_flushed() const override { return true; }  // every write completes before it returns
  asio::awaitable<void> flushed() override { co_return; }
  void cancel_io() override;
  void stop_reading() override;
  bool answers_mid_body() const override { return true; }  // and then closes the connection

 private:
  // Serves one parsed request; returns whether the connection may carry another.
  asio::awaitable<bool> exchange();
  // An answer of sluice's own, after which the connection closes; `exact`: the body without a newline.
  asio::awaitable<void> respond_locally(unsigned status, std::string_view body, bool exact = false);
  asio::awaitable<bool> upgrade_to_h2c();
  asio::awaitable<error_code> write_all(std::string_view bytes);
  template <class ConstBuffers>
  asio::awaitable<error_code> write_buffers(const ConstBuffers& buffers);
  void body_complete();
  // After the request body: the link's watch (see Link).
  void watch_client();
  asio::awaitable<error_code> end_watch();
  // Between requests, whether the link may rest instead of this coroutine waiting: its watch waits
  // for the next bytes.
  bool may_rest() const;
  friend class Link;
  friend asio::awaitable<bool> serve(ServerContext&, std::shared_ptr<Link>);
  using Phase = Link::Phase;

  std::shared_ptr<Link> link_;
  ServerContext& worker_;
  Downstream& down_;
  beast::flat_buffer& down_buffer_;
  const PeerName& peer_;
  Phase& phase_;
  ScratchBuffer scratch_;  // chunked decoding and lingering, allocated on first use
  static constexpr std::size_t kHeadReserve = 512;
  std::string head_;  // the response head being written, reused across the exchanges of one Connection

  // The exchange in progress.
  std::optional<RequestParser> parser_;
  BodyInfo body_info_;
  Framing body_framing_ = Framing::none;
  std::uint64_t body_remaining_ = 0;  // Framing::length
  std::size_t header_fields_ = 0;     // fields after these in the parser's list are trailers
  bool keep_alive_ = false;           // the client allows another request after this one
  // The request body: `100 Continue` owed before its first read, being read, all read, or left unread
  // because the forwarder stopped reading it (the framing is then out of step: the connection ends).
  enum class RequestBody { continue_owed, reading, complete, abandoned };
  RequestBody body_ = RequestBody::complete;
  // The response: not begun; its head held back to leave with the first body bytes; being written;
  // complete; aborted by the forwarder; or replaced by a tunnel (an upgrade). Only `complete` lets the
  // connection carry another request, and only when `response_keep_`.
  enum class Response { not_started, head_held, writing, complete, aborted, tunnelled };
  Response response_ = Response::not_started;
  // The response moves on, unless the forwarder aborted it: that is final.
  void advance(Response next) {
    if (response_ != Response::aborted) response_ = next;
  }
  Framing out_framing_ = Framing::none;
  bool response_keep_ = false;   // the response said the connection stays open
  bool no_watch_ = false;        // an upgrade request: the tunnel reads the socket
  bool io_cancelled_ = false;    // a deadline passed or the client left: no more I/O for this exchange
  bool rested_ = false;          // run() ended with End::rest: the link lives on without this

  Notifier watch_done_;
  bool linger_ = false;  // the connection ends after a local answer: drain what the client still sends
  std::unique_ptr<h2::UpgradeRequest> upgrade_;  // set once 101 went out for h2c
};

// Accepted-socket entry point. `initial_bytes` were read from the socket already (while sniffing for the
// HTTP/2 preface). Returns true at once: the connection lives on in its Link, whose first Connection runs in
// a coroutine of its own (see ServerContext::served).
// (By reference: GCC 12 destroys by-value temporaries of a co_await expression twice.)
asio::awaitable<bool> serve(ServerContext& worker, Downstream& socket, const std::string& initial_bytes);
// Serves a link until it closes, is handed over to h2c, or rests; started by Link::wake() with co_spawn
// (never co_awaited: GCC 12 and the by-value argument, above).
asio::awaitable<bool> serve(ServerContext& worker, std::shared_ptr<Link> link);

}  // namespace sluice::proxy::h1
