// TLS with OpenSSL on the socket itself; see tls_socket.h.
#include "proxy/io/tls_socket.h"

#include <cerrno>
#include <new>

#include <boost/asio/ssl/error.hpp>

namespace sluice::proxy {

TlsSocket::TlsSocket(tcp::socket socket, asio::ssl::context& context, asio::ssl::stream_base::handshake_type side)
    : socket_(std::move(socket)), ssl_(SSL_new(context.native_handle())) {
  if (!ssl_) throw std::bad_alloc();
  // OpenSSL reads and writes the descriptor; it must not block (WANT_READ/WANT_WRITE send us waiting).
  error_code ec;
  socket_.non_blocking(true, ec);
  SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle()));
  if (side == asio::ssl::stream_base::client)
    SSL_set_connect_state(ssl_);
  else
    SSL_set_accept_state(ssl_);
  // write_some semantics: a write may end after whole records, and a retry may pass the rest from
  // wherever the caller keeps it.
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  // Read what the socket has, not a record header and then its body: one read() per batch of records
  // instead of two per record. SSL_read still answers WANT_READ only when no whole record is buffered.
  SSL_set_read_ahead(ssl_, 1);
}

TlsSocket::~TlsSocket() { SSL_free(ssl_); }

void TlsSocket::notify_close() {
  if (!SSL_is_init_finished(ssl_) || (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) != 0) return;
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);  // 0: sent, the peer's has not come (and need not); <0: could not write now
  ERR_clear_error();
}

error_code TlsSocket::failure(int rv) {
  switch (SSL_get_error(ssl_, rv)) {
    case SSL_ERROR_ZERO_RETURN:
      return asio::error::eof;  // close_notify
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0)
        return errno != 0 ? error_code(errno, asio::error::get_system_category()) : error_code(asio::error::eof);
      break;
    case SSL_ERROR_SSL:
      // A peer that closed without close_notify, as most HTTP clients do once they have their answer.
      if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return asio::error::eof;
      break;
    default:
      break;
  }
  auto code = ERR_get_error();
  ERR_clear_error();
  return error_code(static_cast<int>(code ? code : static_cast<unsigned long>(SSL_R_UNEXPECTED_MESSAGE)),
                    asio::error::get_ssl_category());
}

}  // namespace sluice::proxy
