// The Exchange model: one request and its response, whatever protocol carries either side. It is the only
// thing the codecs and the forwarder share. A downstream codec (downstream/) presents each request as a
// ServerExchange to an ExchangeHandler; an upstream codec (upstream/) carries it to the app as a ClientExchange.
// Bodies are streamed through views with back-pressure both ways: a read gives bytes that stay valid until
// they are consumed, and a write returns once the bytes are on their way (or a fixed buffer has room).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "proxy/exchange/probe.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

// Header fields (or trailers) as a list: name, value.
using FieldList = std::vector<std::pair<std::string, std::string>>;

// What one exchange was, as the request log and the metrics see it.
struct ExchangeRecord {
  Clock::time_point start;
  std::string method;
  std::string target;
  std::string request_id;
  std::string user_agent;
  std::string referer;
  std::string trace_id;  // X-B3-TraceId, as Knative's default request-log template prints it
  std::string span_trace_id;  // the exported server span's trace id (hex), when tracing sampled it
  Clock::time_point upstream_start{};  // when the app was first asked (the client span's start); zero: never
  Clock::time_point queue_exit{};      // when the breaker let the exchange on or refused it; zero: no breaker
  int app_status = 0;                  // the status the app answered with; 0: it gave no answer
  error_code app_error;                // why the app gave none (connect or exchange failure), when it did not
  std::string peer;      // ip:port of the client
  std::string_view protocol = "HTTP/1.1";
  int status = 0;
  std::uint64_t request_bytes = 0;   // body bytes received from the client
  std::uint64_t response_bytes = 0;  // body bytes sent to the client
  ProbeMarks probe;  // a forwarded request that is a probe all the same (probe.h)
};

// How a message's body is delimited, independent of the wire: absent, of a known length, or of a length
// known only at its end (HTTP/1.1 chunked or close-delimited, HTTP/2 without content-length).
enum class BodyKind { none, length, unknown };
struct BodyInfo {
  BodyKind kind = BodyKind::none;
  // The declared length: the body's for BodyKind::length; for a bodiless response (HEAD, 204, 304) the
  // length the app declared for the entity, passed on as it is.
  std::optional<std::uint64_t> content_length;
};

// A complete answer made by sluice itself (health checks, refusals, failures).
struct LocalAnswer {
  unsigned status = 200;
  std::string body;
  bool exact_body = false;   // no trailing newline (the activator compares "queue" byte for byte)
  std::string network_hash;  // K-Network-Hash to echo, when not empty
  bool close = false;        // the connection ends after it (framing or deadline in doubt)
  unsigned retry_after_seconds = 0;  // Retry-After, when not 0
  bool nosniff = false;      // X-Content-Type-Options: nosniff (queue-proxy's 502 and 503 carry it: Go's http.Error)
};

// Whether a request's target is absolute-form ("http://host/path"): a client that took this hop for a
// forward proxy (http_proxy) sends it so, naming the host it means.
inline bool absolute_form_target(std::string_view target) {
  return !target.empty() && target.front() != '/' && target.find("://") != std::string_view::npos;
}

// The authority an absolute-form target names ("http://user@host:8080/p?q" → "host:8080"; userinfo
// dropped); empty for a target of another form.
inline std::string_view target_authority(std::string_view target) {
  auto start = target.find("://");
  if (start == std::string_view::npos) return {};
  start += 3;
  const auto end = target.find_first_of("/?", start);
  auto authority = target.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  return authority;
}

// Receives a request's fields one by one, in order.
class FieldSink {
 public:
  virtual void field(std::string_view name, std::string_view value) = 0;

 protected:
  ~FieldSink() = default;
};

// The request as the forwarder sends it on: the head's fields come from the forwarder's header policy,
// which an upstream codec asks for while it writes the head in its own protocol.
class UpstreamRequest {
 public:
  std::string_view method;
  std::string_view target;
  BodyInfo body;
  std::string_view upgrade;  // Upgrade to pass on (a WebSocket handshake), or empty
  // Emits the end-to-end and forwarding fields, Host included (h2 makes it :authority).
  virtual void fields(FieldSink& out) const = 0;

 protected:
  ~UpstreamRequest() = default;
};

// Told by a downstream codec when its client went away (connection closed, stream reset) while the
// exchange was in progress.
class ClientGone {
 public:
  virtual void client_gone() = 0;

 protected:
  ~ClientGone() = default;
};

using BodyRead = std::tuple<error_code, asio::const_buffer>;

// The socket the rest of a body can be read from directly, for the forwarder to splice (splice.h): set
// only when the codec would add nothing between that socket and the body (no TLS, a known length, none
// of the body's bytes in the codec's buffer).
struct RawBody {
  tcp::socket* socket = nullptr;
  std::uint64_t remaining = 0;  // body bytes still to come from it
};

// The client's side of one exchange (a downstream codec implements it).
class ServerExchange {
 public:
  ExchangeRecord record;  // start, peer and protocol set by the codec; the rest by the forwarder
  ClientGone* watcher = nullptr;  // set by the forwarder while it needs to know

  virtual http::request_header<>& request() = 0;  // HTTP/2's :authority is its Host field
  virtual BodyInfo request_body() const = 0;
  virtual std::string_view peer_address() const = 0;  // client IP
  virtual bool is_tls() const = 0;

  // The request body: bytes that are here (waiting for some), valid until consumed; an empty view
  // without an error once the body is complete. The codec answers `Expect: 100-continue` on the first read.
  virtual asio::awaitable<BodyRead> read_body() = 0;
  virtual void consume_body(std::size_t n) = 0;
  // The whole request body when it already arrived with the head (a small body), so it can travel in one
  // write with the upstream head; nullopt otherwise. Consumed with consume_body.
  virtual std::optional<asio::const_buffer> body_in_hand() = 0;
  virtual FieldList request_trailers() = 0;  // once read_body gave the end
  // Splicing (splice.h): the request body straight from the client's socket, when the codec allows it;
  // raw_body_taken() tells it how many bytes were moved past it.
  virtual RawBody raw_body_in() { return {}; }
  virtual void raw_body_taken(std::size_t) {}

  // The response: interim heads (1xx), the head, body pieces, the end with trailers.
  virtual asio::awaitable<error_code> send_interim(const http::response_header<>& head) = 0;
  // `more_soon`: body bytes are already at hand, so the head may wait to leave with the first of them.
  virtual asio::awaitable<error_code> send_head(const http::response_header<>& head, BodyInfo body,
                                                bool more_soon) = 0;
  virtual asio::awaitable<error_code> write_body(asio::const_buffer data) = 0;
  virtual asio::awaitable<error_code> end_body(const FieldList& trailers) = 0;
  // The same three done at once, when the codec needs no wait for them (an HTTP/2 stream whose buffer has
  // room): true with the outcome in `ec`; false having done nothing, and the awaitable form is used. They
  // spare a coroutine frame per call; a codec whose writes may always wait keeps these defaults.
  virtual bool send_head_now(const http::response_header<>&, BodyInfo, bool, error_code&) { return false; }
  virtual bool write_body_now(asio::const_buffer, error_code&) { return false; }
  virtual bool end_body_now(const FieldList&, error_code&) { return false; }
  // Splicing: the client's socket, when the response body's bytes may be written to it directly (no TLS,
  // no framing to add, the head already sent); null otherwise.
  virtual tcp::socket* raw_body_out() { return nullptr; }
  virtual asio::awaitable<void> send_local(const LocalAnswer& answer) = 0;
  // The response cannot complete: cut it so the client knows (HTTP/1.1 closes, HTTP/2 resets the stream).
  virtual void abort() = 0;
  // An upgraded exchange (101): relays bytes both ways between the client and `app` until either side
  // ends; `app_read` holds bytes the app sent behind its head. `last_activity` is refreshed on traffic.
  virtual asio::awaitable<void> tunnel(tcp::socket& app, beast::flat_buffer& app_read,
                                       Clock::time_point& last_activity) = 0;
  // Whether the whole response has been handed to the transport (HTTP/1.1: the socket took it; HTTP/2: it
  // is queued for the stream, whose writer sends it as the client's window allows) or the client is gone;
  // if not, flushed() waits for it. Asked first, so that when nothing is left to wait for (the usual
  // case on both codecs) it costs no coroutine frame and no timer.
  virtual bool is_flushed() const = 0;
  virtual asio::awaitable<void> flushed() = 0;
  // Wakes every pending read and write of this exchange with an error (a deadline passed).
  virtual void cancel_io() = 0;
  // The exchange is over for the app's side: bytes of an unread request body are not wanted any more.
  virtual void stop_reading() = 0;
  // Whether a refusal can still be answered while the client is sending its body (HTTP/1.1 answers,
  // then closes the connection); otherwise the exchange is reset (HTTP/2 RST_STREAM).
  virtual bool answers_mid_body() const = 0;

 protected:
  ~ServerExchange() = default;
};

// Whether a request that got no response may go again on another connection.
enum class Staleness {
  fresh,             // no: it failed on a connection that was working
  unprocessed,       // yes: the app says it did not process it (HTTP/2 REFUSED_STREAM, past its GOAWAY)
  maybe_processed,   // only when idempotent: a keep-alive connection the app closed, before any response byte
};

// The app's side of one exchange (an upstream codec implements it). Destroying it before the response
// ended abandons the exchange (the HTTP/1.1 connection is closed, the h2 stream reset).
class ClientExchange {
 public:
  virtual ~ClientExchange() = default;

  // Writes the request head; `body`, when given, is the whole request body, sent with the head.
  virtual asio::awaitable<error_code> send_head(const UpstreamRequest& request,
                                                std::optional<asio::const_buffer> body) = 0;
  virtual asio::awaitable<error_code> write_body(asio::const_buffer data) = 0;
  virtual asio::awaitable<error_code> end_body(const FieldList& trailers) = 0;
  // Splicing (splice.h): the app's socket, when the request body's bytes may be written to it directly.
  virtual tcp::socket* raw_body_out() { return nullptr; }

  // The next response head: interim (1xx) heads first, one per call, then the final one. The head stays
  // valid until the next call or the end of the exchange; the forwarder applies this hop's field policy
  // to it in place (remove_hop_fields) before a downstream codec sees it.
  virtual asio::awaitable<std::tuple<error_code, http::response_header<>*>> read_head() = 0;
  virtual BodyInfo response_body() const = 0;  // of the final head
  virtual bool body_at_hand() const = 0;        // response body bytes arrived with the head
  virtual asio::awaitable<BodyRead> read_body() = 0;
  // What read_body() gives, when it can give it without waiting (bytes at hand, the end, an error): true
  // with `out` set; false having done nothing. Asked first, it spares a coroutine frame per piece.
  virtual bool read_body_now(BodyRead& /*out*/) { return false; }
  virtual void consume_body(std::size_t n) = 0;
  // What read_body() would give now is the end: the body was consumed to its last byte (the forwarder
  // then ends the response without another read, a coroutine frame less per response).
  virtual bool body_ended() const = 0;
  virtual const FieldList& trailers() = 0;  // once read_body gave the end, or body_ended()
  // Splicing: the response body straight from the app's socket, when the codec allows it.
  virtual RawBody raw_body_in() { return {}; }
  virtual void raw_body_taken(std::size_t) {}

  // Wakes every pending operation with operation_aborted and abandons the exchange.
  virtual void cancel() = 0;
  // After a failure before any response byte: whether the app took the request at all.
  virtual Staleness stale() const = 0;
  // On a new connection, right after the request head went: true once the app sends anything back or, at
  // `within`, when its kernel has acknowledged the request; false when it has not (its listen queue was
  // full, so the connection was never accepted and nothing reached the app).
  virtual asio::awaitable<bool> taken(Clock::duration /*within*/) { co_return true; }
  // Done cleanly: hands itself back (`self` is this object) so its connection may carry another exchange.
  virtual void release(std::unique_ptr<ClientExchange> self) = 0;
  // An upgraded exchange (101): the raw connection for the tunnel, or null when this protocol has none.
  virtual tcp::socket* tunnel_socket(beast::flat_buffer*& already_read) = 0;
};

// Where a downstream codec hands each exchange it has parsed: in a worker, the forwarder (forward/context.h).
class ExchangeHandler {
 public:
  // Runs one exchange to its end: the response sent (or cut), the request log written, stats counted. An
  // implementation returns the awaitable of the coroutine that does it, not a frame of its own around it.
  virtual asio::awaitable<void> handle(ServerExchange& down) = 0;
  // Writes the request-log line of an exchange that ended before it could be handed over (a request the
  // codec could not parse), when the request log is on. `req`: its head, when there is one.
  virtual void unhandled(const ExchangeRecord& record, const http::request_header<>* req = nullptr) = 0;

 protected:
  ~ExchangeHandler() = default;
};

}  // namespace sluice::proxy
