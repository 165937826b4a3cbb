// TLS over a TCP socket, with OpenSSL reading and writing the socket itself (its socket BIO on the
// non-blocking descriptor) and Asio only waiting for readiness. Asio's own ssl::stream runs OpenSSL over
// a memory BIO pair, which copies every record into the pair and out of it into Asio's buffer, and sends
// each record with a write of its own; here a record goes from OpenSSL's buffer to the socket, and the
// only copy of the plaintext is OpenSSL's.
//
// The operations have Asio's stream shape (async_read_some, async_write_some with any completion token),
// so Beast's HTTP reader and asio::async_write work on it unchanged. One operation of each direction at a
// time, as with any Asio stream; OpenSSL's state is touched only on the socket's executor.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <vector>

#include "proxy/io/asio.h"
#include "proxy/io/edge_wait.h"

namespace sluice::proxy {

class TlsSocket {
 public:
  using executor_type = asio::any_io_executor;

  // A server-side session on `socket` with `context`'s settings (certificate, ALPN, versions); with
  // `side` client, a client-side one, whose host name, SNI and ALPN tls_client.h sets before the handshake.
  TlsSocket(tcp::socket socket, asio::ssl::context& context,
            asio::ssl::stream_base::handshake_type side = asio::ssl::stream_base::server);
  ~TlsSocket();
  TlsSocket(const TlsSocket&) = delete;
  TlsSocket& operator=(const TlsSocket&) = delete;

  SSL* native_handle() { return ssl_; }
  tcp::socket& next_layer() { return socket_; }
  const tcp::socket& next_layer() const { return socket_; }
  executor_type get_executor() { return socket_.get_executor(); }

  // void(error_code). The side was fixed at construction; the argument is there for Asio's stream shape.
  template <class Token>
  auto async_handshake(asio::ssl::stream_base::handshake_type, Token&& token) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          run([this](std::size_t& n) { n = 0; return SSL_do_handshake(ssl_); },
              WithoutCount<decltype(handler)>{std::move(handler)});
        },
        token);
  }

  // Sends close_notify if the socket takes it at once (no wait: the connection is closing anyway).
  // Only between operations: not while a write is under way.
  void notify_close();

  // void(error_code, std::size_t): some bytes of the first non-empty buffer.
  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    asio::mutable_buffer b(first(buffers));
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this, b](auto handler) {
          run([this, b](std::size_t& n) { return b.size() == 0 ? 1 : SSL_read_ex(ssl_, b.data(), b.size(), &n); },
              std::move(handler));
        },
        token);
  }

  // Reads what OpenSSL has or the socket gives now, never waiting: the count of bytes (more than 0), or
  // 0 with `ec` set: asio::error::would_block when OpenSSL's read saw EAGAIN on the socket (with `want`
  // then saying what to wait for, wait_after_eagain()'s precondition holding), or the failure. A reader
  // that takes each read's bytes before it reads again can use a buffer other connections share.
  std::size_t read_now(asio::mutable_buffer b, error_code& ec, tcp::socket::wait_type& want) {
    ec = {};
    std::size_t n = 0;
    ERR_clear_error();
    const int rv = SSL_read_ex(ssl_, b.data(), b.size(), &n);
    if (rv == 1) return n;
    switch (SSL_get_error(ssl_, rv)) {
      case SSL_ERROR_WANT_READ: want = tcp::socket::wait_read; ec = asio::error::would_block; break;
      case SSL_ERROR_WANT_WRITE: want = tcp::socket::wait_write; ec = asio::error::would_block; break;
      default: ec = failure(rv); break;
    }
    return 0;
  }

  // Writes as much of `buffers` as the socket takes now, never waiting (send_now.h's rule over TLS):
  // the count of bytes written, which is less than the whole when the socket filled up, or 0 with `ec`
  // set when the connection failed. A record OpenSSL could only partly send stays with it: the next
  // write must offer the same bytes again, as write_rest() does.
  template <class ConstBuffers>
  std::size_t write_now(const ConstBuffers& buffers, error_code& ec) {
    ec = {};
    beast::buffers_suffix<ConstBuffers> rest(buffers);
    std::size_t total = 0;
    while (true) {
      const asio::const_buffer b = gather(rest);
      if (b.size() == 0) return total;
      std::size_t n = 0;
      ERR_clear_error();
      const int rv = SSL_write_ex(ssl_, b.data(), b.size(), &n);
      if (rv != 1) {
        const int reason = SSL_get_error(ssl_, rv);
        if (reason != SSL_ERROR_WANT_WRITE && reason != SSL_ERROR_WANT_READ) ec = failure(rv);
        return ec ? 0 : total;
      }
      total += n;
      rest.consume(n);
    }
  }

  // void(error_code, std::size_t): some leading bytes of `buffers` (a partial write is whole records).
  // Small leading buffers (an HTTP/1.1 head and a short body, say) go out as one record: they are copied
  // together into a staging buffer of 8 KiB, as a record per buffer would cost a record header, a MAC
  // and a system call each. The staging buffer is the thread's, used within the attempt that gathers
  // into it; a write that has to wait for the socket keeps a copy of its own (OpenSSL is told the bytes
  // may move: SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), so that an idle connection holds none.
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& b) { run(Write{this, gather(b), {}}, std::move(handler)); }, token,
        buffers);
  }

 private:
  // A void(error_code) handler called as void(error_code, std::size_t); cancellation still reaches it.
  template <class H>
  struct WithoutCount {
    H handler;
    void operator()(error_code ec, std::size_t) { std::move(handler)(ec); }
    using cancellation_slot_type = asio::associated_cancellation_slot_t<H>;
    cancellation_slot_type get_cancellation_slot() const noexcept {
      return asio::get_associated_cancellation_slot(handler);
    }
  };

  template <class Buffers>
  static auto first(const Buffers& buffers) {
    using Buffer = std::decay_t<decltype(*asio::buffer_sequence_begin(buffers))>;
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it)
      if (Buffer b(*it); b.size() > 0) return b;
    return Buffer{};
  }

  // One write's attempt: its bytes, and their copy once it waits (staging() is the thread's).
  struct Write {
    TlsSocket* self;
    asio::const_buffer bytes;
    std::vector<char> kept;
    int operator()(std::size_t& n) {
      const asio::const_buffer b = kept.empty() ? bytes : asio::buffer(kept);  // `kept` moves with this
      return b.size() == 0 ? 1 : SSL_write_ex(self->ssl_, b.data(), b.size(), &n);
    }
    void before_wait() {
      if (bytes.data() != staging().data() || !kept.empty()) return;
      const auto* p = static_cast<const char*>(bytes.data());
      kept.assign(p, p + bytes.size());
    }
  };

  // Half a record's plaintext at most (16 KiB, RFC 8446 §5.1): a head with a short body.
  static constexpr std::size_t kStaging = 8 * 1024;
  static std::array<char, kStaging>& staging() {
    static thread_local std::array<char, kStaging> buffer;
    return buffer;
  }

  // The first non-empty buffer; or, when it and the whole buffers after it fit into one record, those
  // buffers copied together into staging() (a buffer that does not fit whole is left for the next write:
  // a large body is never copied there).
  template <class ConstBuffers>
  asio::const_buffer gather(const ConstBuffers& buffers) {
    auto it = asio::buffer_sequence_begin(buffers);
    const auto end = asio::buffer_sequence_end(buffers);
    while (it != end && asio::const_buffer(*it).size() == 0) ++it;
    if (it == end) return {};
    asio::const_buffer head(*it);
    std::size_t used = 0;  // bytes in staging(); 0 while `head` is alone
    for (auto next = std::next(it); next != end; ++next) {
      asio::const_buffer b(*next);
      if (b.size() == 0) continue;
      if (std::max(used, head.size()) + b.size() > kStaging) break;
      if (used == 0) {
        std::memcpy(staging().data(), head.data(), head.size());
        used = head.size();
      }
      std::memcpy(staging().data() + used, b.data(), b.size());
      used += b.size();
    }
    return used == 0 ? head : asio::const_buffer(staging().data(), used);
  }

  // Tries `attempt` (an SSL call returning 1 on success, with the byte count in its argument); while
  // OpenSSL wants the socket readable or writable, waits for that and tries again. A result reached
  // without any wait is posted, not delivered from inside the initiating call (Asio's rule for
  // asynchronous operations, which composed operations and coroutines rely on).
  template <class Attempt, class Handler>
  void run(Attempt attempt, Handler&& handler) {
    using H = std::decay_t<Handler>;
    struct Op {
      TlsSocket* self;
      Attempt attempt;
      H handler;
      bool waited = false;
      // The waits carry the caller's cancellation (a timeout raced with `||`, say) to the socket.
      using cancellation_slot_type = asio::associated_cancellation_slot_t<H>;
      cancellation_slot_type get_cancellation_slot() const noexcept {
        return asio::get_associated_cancellation_slot(handler);
      }
      void operator()(error_code wait_error = {}) {
        if (wait_error) return finish(wait_error, 0);
        std::size_t n = 0;
        ERR_clear_error();
        int rv = attempt(n);
        if (rv == 1) return finish(error_code{}, n);
        switch (SSL_get_error(self->ssl_, rv)) {
          // OpenSSL's own read or write on the socket just failed with EAGAIN (edge_wait.h).
          case SSL_ERROR_WANT_READ:
            before_wait();
            return wait_after_eagain(self->socket_, tcp::socket::wait_read, std::move(*this));
          case SSL_ERROR_WANT_WRITE:
            before_wait();
            return wait_after_eagain(self->socket_, tcp::socket::wait_write, std::move(*this));
          default:
            return finish(self->failure(rv), 0);
        }
      }
      void before_wait() {
        waited = true;
        if constexpr (requires { attempt.before_wait(); }) attempt.before_wait();
      }
      void finish(error_code ec, std::size_t n) {
        if (waited) return std::move(handler)(ec, n);
        auto ex = asio::get_associated_executor(handler, self->socket_.get_executor());
        asio::post(ex, [h = std::move(handler), ec, n]() mutable { std::move(h)(ec, n); });
      }
    };
    Op{this, std::move(attempt), std::forward<Handler>(handler)}();
  }

  // The error for a failed SSL call: a clean close_notify or a bare EOF is asio::error::eof.
  error_code failure(int rv);

  tcp::socket socket_;
  SSL* ssl_ = nullptr;
};

}  // namespace sluice::proxy
