// What the HTTP/2 server and client codecs share of nghttp2, written once: the session and its
// callbacks, the writer loop, the send queues that DATA frames are cut from, and header-list helpers.
//
// Body bytes are copied once on their way out: into a stream's SendQueue (a fixed ring) when the
// forwarder hands them over. nghttp2 never copies them (NGHTTP2_DATA_FLAG_NO_COPY): the writer gathers
// frame headers and slices of the rings into one vectored write, and frees ring space only when the
// write completed. Over TLS the batch is made contiguous first, so that records are full (OpenSSL has no
// gathered write, and the TLS socket joins only small buffers): one more copy there.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/exchange/exchange.h"
#include "proxy/io/asio.h"
#include "proxy/io/notifier.h"
#include "proxy/io/send_now.h"

namespace sluice::proxy::h2 {

// The receive windows sluice advertises, by its role on the connection: how much of a body may wait in
// sluice on its way. A stream's window bounds one exchange; the connection's leaves room for many
// streams' windows at once, so that one slow peer does not stall the others.
struct ReceiveWindows {
  std::int32_t stream;
  std::int32_t connection;
};
// As the server, for request bodies waiting for the app.
inline constexpr ReceiveWindows kServerWindows{.stream = 256 * 1024, .connection = 4 * 1024 * 1024};
// As the h2c client, for responses waiting for a slow client.
inline constexpr ReceiveWindows kClientWindows{.stream = 256 * 1024, .connection = 64 * 1024 * 1024};

class Wire;

// A header field for nghttp2, pointing at `name` and `value` (which must outlive the submit call).
inline nghttp2_nv nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}
inline std::string_view as_view(const uint8_t* p, std::size_t n) { return {reinterpret_cast<const char*>(p), n}; }

// One stream's outgoing body, then its trailers. The producer appends; the writer cuts DATA frames
// from it and frees the bytes once the socket took them.
class SendQueue {
 public:
  SendQueue(const asio::any_io_executor& ex, std::size_t capacity) : space(ex), capacity_(capacity) {}
  SendQueue(const SendQueue&) = delete;
  SendQueue& operator=(const SendQueue&) = delete;

  // Room for the producer now. An empty queue may grow its ring up to the capacity.
  std::size_t room() const { return (in_flight_ + unsent_ == 0 ? capacity_ : size_) - in_flight_ - unsent_; }
  std::size_t unsent() const { return unsent_; }
  std::size_t in_flight() const { return in_flight_; }
  // Copies as much of `data` as there is room for; returns how much.
  std::size_t append(asio::const_buffer data);
  // Drops what is not sent yet (the stream is going away).
  void discard() { unsent_ = 0; }

  bool done = false;      // no more body after what is queued
  bool deferred = false;  // nghttp2 waits for resume_data
  FieldList trailers;     // sent after the body when not empty
  Notifier space;         // room appeared, or the stream went away

 private:
  friend class Wire;
  // The writer: the next `n` unsent bytes go out now (one or two slices: the ring may wrap).
  void take(std::size_t n, std::vector<asio::const_buffer>& out);
  // The writer: `n` bytes taken earlier were written.
  void release(std::size_t n);

  Wire* wire_ = nullptr;           // set by Wire::provider()
  // Sized by the first append (a short response takes a few KiB, not the capacity) and regrown only
  // while empty, so that growing never copies.
  std::unique_ptr<char[]> ring_;
  std::size_t size_ = 0;
  std::size_t capacity_;
  std::size_t start_ = 0;     // first byte in flight (or unsent, when none is in flight)
  std::size_t in_flight_ = 0;
  std::size_t unsent_ = 0;
};

// The callbacks a codec gives the session; `owner` is their user data.
struct WireCallbacks {
  nghttp2_on_begin_headers_callback on_begin_headers = nullptr;
  nghttp2_on_header_callback on_header = nullptr;
  nghttp2_on_frame_recv_callback on_frame_recv = nullptr;
  nghttp2_on_data_chunk_recv_callback on_data_chunk = nullptr;
  nghttp2_on_stream_close_callback on_stream_close = nullptr;
  // Optional: the server's abuse guard and RFC 9113 §8 checks.
  nghttp2_on_begin_frame_callback on_begin_frame = nullptr;
  nghttp2_on_invalid_frame_recv_callback on_invalid_frame = nullptr;
  // Optional: a frame nghttp2 could not send (a response head larger than it may send).
  nghttp2_on_frame_not_send_callback on_frame_not_send = nullptr;
};

enum class SessionRole { server, client };

// How sluice makes an nghttp2 session: the one place for its callbacks and options, used by Wire (both h2
// codecs) and by GrpcClientSession (the gRPC health probe and the OTLP exporter).
struct SessionSetup {
  SessionRole role = SessionRole::client;
  WireCallbacks callbacks;
  std::vector<nghttp2_settings_entry> settings;  // submitted at once
  std::int32_t connection_window = 0;  // the connection's receive window; 0: the protocol's initial 65,535
  // The codecs send WINDOW_UPDATE themselves as the far side reads the bytes; a client that takes each
  // response whole leaves that to nghttp2.
  bool auto_window_updates = false;
  // A header field that breaks RFC 9113's rules resets its stream (the codecs); otherwise nghttp2 drops
  // the field.
  bool reset_on_invalid_header = true;
  nghttp2_send_data_callback send_data = nullptr;  // DATA frames written by the caller (Wire's no-copy path)
  std::function<void(nghttp2_option*)> configure;  // any further option
};

// The session, or null when nghttp2 could not make it. `mem`: nghttp2's allocator (null: malloc's).
nghttp2_session* new_session(const SessionSetup& setup, void* owner, nghttp2_mem* mem = nullptr);

// One nghttp2 session and the write side of its connection.
class Wire {
 public:
  using Role = SessionRole;
  explicit Wire(const asio::any_io_executor& ex) : write_wanted_(ex) {}
  ~Wire();
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;

  // Creates the session (new_session: window updates sent by the codec as the far side reads, invalid
  // header fields reset their stream, 32 entries per SETTINGS frame at most; then whatever `configure`
  // sets), then submits `settings`.
  bool start(Role role, const WireCallbacks& callbacks, void* owner, const std::vector<nghttp2_settings_entry>& settings,
             std::int32_t connection_window, const std::function<void(nghttp2_option*)>& configure = {});
  nghttp2_session* session() const { return ng_; }

  // Received bytes into the session: 0, or nghttp2's (fatal) error; nghttp2 queued GOAWAY where it sends one.
  int feed(const char* data, std::size_t n);

  // A data provider reading from `q`: DATA frames cut from it without copying, trailers at its end.
  nghttp2_data_provider provider(SendQueue& q);
  // More is queued in `q` (or it is done): lets nghttp2 call the provider again.
  void resume(std::int32_t stream_id, SendQueue& q);
  // The stream that owned `q` is gone; bytes of it still in a write keep it alive until written.
  void retire(std::unique_ptr<SendQueue> q);

  // Wakes the writer (something was submitted).
  void want_write() { write_wanted_.notify(); }

  // For a connection gone idle (no stream, nothing to write): nghttp2's outbound frame buffer gives its
  // pages back to the system (its bytes are dead between frames; the next frame gets the pages back,
  // zeroed), and the writer's batch buffers their capacity. Does nothing while a write is under way.
  void rest();

  // Writes what nghttp2 has to send until `stop()` holds with nothing left to send, or the socket fails.
  // Returns the write error, if any.
  template <class Socket, class Stop>
  asio::awaitable<error_code> write_loop(Socket& socket, bool contiguous, Stop stop);

  bool wants_io() const { return nghttp2_session_want_read(ng_) || nghttp2_session_want_write(ng_); }
  // A socket write is under way.
  bool writing() const { return writing_; }
  // Called whenever response or request bytes move: cut into a frame, or written to the socket.
  std::function<void()> on_progress;

 private:
  static ssize_t read_data(nghttp2_session*, std::int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* src, void* owner);
  // A field name or value that is not valid makes the message malformed (RFC 9113 §8.2.1): the stream
  // is reset with PROTOCOL_ERROR on both sides (nghttp2 would drop the field silently).
  static int send_data(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
                       nghttp2_data_source* src, void* owner);
  // Fills the batch; false when nghttp2 failed.
  bool collect(std::size_t limit);
  void add_frame_bytes(const uint8_t* data, std::size_t n);
  void written();

  // nghttp2's allocations: from the per-thread free lists (common/thread_cache.h), but for its outbound
  // frame buffer (one per session, allocated with it: kFrameBufferBytes in nghttp2 1.52), which starts
  // on a page of its own so that rest() can hand its whole pages back. (A library that allocates it
  // otherwise leaves it an ordinary block that rest() does not touch.)
  static void* ng_malloc(std::size_t size, void* wire);
  static void ng_free(void* block, void* wire);
  static void* ng_calloc(std::size_t count, std::size_t size, void* wire);
  static void* ng_realloc(void* block, std::size_t size, void* wire);
  static constexpr std::size_t kFrameBufferBytes = 9 + 1 + 16384;  // a frame header, a pad length, a payload
  static std::size_t frame_buffer_span();  // kFrameBufferBytes in whole pages: what the aligned block holds
  nghttp2_mem mem_{this, &Wire::ng_malloc, &Wire::ng_free, &Wire::ng_calloc, &Wire::ng_realloc};
  void* frame_buffer_ = nullptr;

  nghttp2_session* ng_ = nullptr;
  Notifier write_wanted_;
  // The batch being assembled or written: frame bytes are appended to `frames_`; `pieces_` says, in
  // order, which spans of `frames_` and which ring slices make up the write.
  struct Piece {
    const char* ring = nullptr;  // a ring slice, or null for frames_[offset, offset + size)
    std::size_t offset = 0, size = 0;
  };
  std::string frames_;
  std::vector<Piece> pieces_;
  std::vector<std::pair<SendQueue*, std::size_t>> taken_;  // ring bytes in the batch, per queue
  std::vector<std::unique_ptr<SendQueue>> retired_;
  std::vector<asio::const_buffer> gather_, slices_;
  std::string flat_;
  std::size_t batch_bytes_ = 0;
  bool writing_ = false;
};

inline constexpr std::size_t kWriteBatch = 64 * 1024;

template <class Socket, class Stop>
asio::awaitable<error_code> Wire::write_loop(Socket& socket, bool contiguous, Stop stop) {
  while (true) {
    if (!collect(kWriteBatch)) co_return error_code(asio::error::connection_aborted);
    if (batch_bytes_ == 0) {
      if (stop()) co_return error_code{};
      co_await write_wanted_.wait();
      continue;
    }
    gather_.clear();
    for (const auto& p : pieces_)
      gather_.emplace_back(p.ring ? p.ring + p.offset : frames_.data() + p.offset, p.size);
    error_code ec;
    writing_ = true;
    std::span<const asio::const_buffer> pieces(gather_);
    asio::const_buffer whole;
    if (contiguous && gather_.size() > 1) {
      flat_.resize(batch_bytes_);
      asio::buffer_copy(asio::buffer(flat_), gather_);
      whole = asio::buffer(flat_);
      pieces = std::span<const asio::const_buffer>(&whole, 1);
    }
    // Most batches fit the socket's buffer: written now, the loop goes on without a trip through the
    // scheduler (send_now.h).
    if (const std::size_t sent = send_now(socket, pieces, ec); !ec && sent < batch_bytes_)
      ec = co_await write_rest(socket, pieces, sent);
    writing_ = false;
    written();
    if (on_progress) on_progress();
    if (ec) co_return ec;
  }
}

}  // namespace sluice::proxy::h2
