// One HTTP/2 server connection (h2c or h2 over TLS): the nghttp2 session (through Wire), the streams
// it owns, and the reader and writer of its socket. Each stream's exchange runs as a coroutine of its
// own that the session joins before it ends.
#pragma once

#include <list>
#include <optional>
#include <string>

#include "common/watchdog.h"
#include "proxy/codec/h2/guard.h"
#include "proxy/codec/h2/wire.h"
#include "proxy/downstream/context.h"
#include "proxy/downstream/h2_handover.h"
#include "proxy/downstream/h2_stream.h"
#include "proxy/exchange/downstream.h"
#include "proxy/exchange/peer.h"

namespace sluice::proxy::h2 {

class Session final : private net::Watchdog::Target, public ConnectionHandle {
 public:
  Session(ServerContext& worker, Downstream socket, PeerName peer);
  ~Session();

  asio::awaitable<void> run(const std::string& initial, std::unique_ptr<UpgradeRequest>& upgrade);
  void close_when_idle() override;

  // For the streams.
  void submit_local(Stream& s, const LocalAnswer& a);
  // The app's response head; an interim (1xx) one goes out as a HEADERS frame of its own.
  // declared_length: the content-length to send when `res` names none (a response without a body whose
  // length is known: the app's HEADERS ended its stream).
  void submit_head(Stream& s, const http::response_header<>& res, bool with_body, bool interim,
                   std::optional<std::uint64_t> declared_length = std::nullopt);
  void reset_stream(Stream& s, std::uint32_t error);
  void consume(Stream& s, std::size_t n);
  void resume(Stream& s) {
    if (s.state != Stream::State::closed) wire_.resume(s.id, *s.out);
    else wire_.want_write();
  }
  void retire(std::unique_ptr<SendQueue> q) { wire_.retire(std::move(q)); }
  const std::string& peer_address() const { return peer_.address; }
  // Streams whose exchange is still running (the fuzz target waits for them before its client leaves).
  std::size_t exchanges_running() const { return running_; }
  bool is_tls() const { return socket_.is_tls(); }

 private:
  // nghttp2's user_data in the callbacks below: the session itself.
  static Session& self_of(void* p) { return *static_cast<Session*>(p); }
  // nghttp2 callbacks.
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* self);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len,
                           void* self);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* self);
  // Abuse and RFC 9113 §8 hooks (the accounting is in guard.h).
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* self);
  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* self);
  // A response head nghttp2 could not send: the stream is reset (INTERNAL_ERROR), not left waiting.
  static int on_frame_not_send(nghttp2_session*, const nghttp2_frame* f, int error, void* self);
  bool reject_stream(std::int32_t id, std::string_view why);
  void end_abusive(std::uint32_t code, std::string_view why, bool cut = false);
  bool response_waiting() const;

  bool start(std::string_view upgrade_settings, bool head_upgrade, Stream* upgraded);
  Stream* find(std::int32_t id) {
    return static_cast<Stream*>(nghttp2_session_get_stream_user_data(wire_.session(), id));
  }
  Stream& add_stream(std::int32_t id);
  void launch(Stream& s);
  void forget_if_done(Stream& s);
  // Answers a request refused before forwarding (431, a bad Host, ...), then logs it.
  asio::awaitable<void> refuse(Stream& s, LocalAnswer answer);
  bool done() const { return !wire_.wants_io(); }
  bool finished() const { return done() || (going_away_ && open_streams_ == 0 && running_ == 0); }

  ServerContext& worker_;
  Downstream socket_;
  PeerName peer_;
  Wire wire_;                 // before the streams: their send queues retire into it
  std::list<Stream> streams_;  // open, or closed with their exchange still running
  std::size_t open_streams_ = 0;  // not closed by nghttp2 yet
  std::size_t running_ = 0;       // serve_stream() coroutines not yet finished
  Notifier streams_finished_;
  bool going_away_ = false;
  bool broken_ = false;
  Clock::time_point last_activity_ = Clock::now();
  ConnectionGuard guard_;
  // The idle close (no stream for the header timeout: GOAWAY) and the stall check (response bytes that
  // wait on a client without progress for the stall timeout, looked at four times per timeout) are one
  // entry in the worker's deadline heap: no timer and no coroutine of their own.
  Clock::time_point next_deadline() const override;
  void on_deadline() override;
  net::Watchdog watchdog_;
  Clock::time_point next_stall_check_ = Clock::time_point::max();
  bool watched_ = false;    // the deadlines apply (from the start of run() until its reader ends)
  bool idle_over_ = false;  // the idle check is done (GOAWAY sent, or nothing left to do): the stall check goes on
  // The rest: a session without a stream for kRestAfter gives back the memory it does not need while
  // idle (Wire::rest); a rested session's next read takes the rest deadline up again. Not at once, which
  // would cost a system call and a page fault per request on a connection that carries one at a time.
  static constexpr Clock::duration kRestAfter = std::chrono::seconds(1);
  bool rested_ = false;
  Clock::time_point rest_not_before_ = Clock::time_point::min();  // pushed on while streams are open
  bool rejection_logged_ = false;
  std::string head_names_;          // submit_head's scratch, reused
  std::vector<nghttp2_nv> head_nva_;
};

}  // namespace sluice::proxy::h2
