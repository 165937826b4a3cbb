// The client's side of a connection: a plain TCP socket, or TLS over one. The codecs are written once
// against this type; the choice costs one predictable branch per I/O operation.
#pragma once

#include <memory>
#include <string_view>

#include <boost/asio/ssl/context.hpp>

#include "proxy/io/asio.h"
#include "proxy/io/send_now.h"
#include "proxy/io/tls_socket.h"

namespace sluice::proxy {

namespace ssl = asio::ssl;

inline constexpr std::string_view kHttps = "https";  // X-Forwarded-Proto / Forwarded proto on TLS

class Downstream {
 public:
  using executor_type = asio::any_io_executor;
  using TlsStream = TlsSocket;

  explicit Downstream(tcp::socket socket) : plain_(std::move(socket)) {}
  // `context` is kept alive as long as the connection: a certificate reload swaps in a new one for new
  // connections only.
  Downstream(std::unique_ptr<TlsStream> tls, std::shared_ptr<ssl::context> context)
      : plain_(tls->get_executor()), tls_(std::move(tls)), context_(std::move(context)) {}
  Downstream(Downstream&&) = default;
  Downstream& operator=(Downstream&&) = default;

  bool is_tls() const { return tls_ != nullptr; }
  TlsStream* tls() { return tls_.get(); }
  tcp::socket& socket() { return tls_ ? tls_->next_layer() : plain_; }
  const tcp::socket& socket() const { return tls_ ? tls_->next_layer() : plain_; }
  executor_type get_executor() { return plain_.get_executor(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          if (tls_) tls_->async_read_some(b, std::move(handler));
          else plain_.async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& b) {
          if (tls_) tls_->async_write_some(b, std::move(handler));
          else plain_.async_write_some(b, std::move(handler));
        },
        token, buffers);
  }

  // What the codecs do to the connection itself act on the TCP socket underneath.
  void cancel(error_code& ec) { socket().cancel(ec); }
  void close(error_code& ec) { socket().close(ec); }
  // Over TLS, a close_notify goes first (if the socket takes it now), so that the client can tell the
  // end of the connection from a cut one.
  void shutdown(tcp::socket::shutdown_type what, error_code& ec) {
    if (tls_ && what != tcp::socket::shutdown_receive) tls_->notify_close();
    socket().shutdown(what, ec);
  }
  tcp::endpoint remote_endpoint(error_code& ec) const { return socket().remote_endpoint(ec); }
  template <class Option>
  void set_option(const Option& o, error_code& ec) { socket().set_option(o, ec); }

 private:
  tcp::socket plain_;  // the socket itself, or (with TLS) an unopened placeholder for the executor
  std::unique_ptr<TlsStream> tls_;
  std::shared_ptr<ssl::context> context_;
};

// read_now() (send_now.h) on either kind of connection: over TLS, what OpenSSL has or reads now. After
// asio::error::would_block, `want` says what to wait for with wait_after_eagain() (OpenSSL may need to
// write to read); a reader that takes each read's bytes before its next wait may read into a buffer
// other connections share.
inline std::size_t read_now(Downstream& down, asio::mutable_buffer b, error_code& ec, tcp::socket::wait_type& want) {
  want = tcp::socket::wait_read;
  return down.tls() ? down.tls()->read_now(b, ec, want) : read_now(down.socket(), b, ec);
}

// send_now() (send_now.h) on either kind of connection: over TLS, the records OpenSSL writes now.
template <class ConstBuffers>
std::size_t send_now(Downstream& down, const ConstBuffers& buffers, error_code& ec) {
  return down.tls() ? down.tls()->write_now(buffers, ec) : send_now(down.socket(), buffers, ec);
}

}  // namespace sluice::proxy
