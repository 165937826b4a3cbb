// Reads from a TCP socket that tell Asio's reactor when they have emptied it, so that the next read
// waits for epoll instead of trying recv(2) first.
//
// Asio starts every read with a "speculative" recv and only waits in epoll when that fails with EAGAIN.
// It stops speculating on a socket only when a read returns 0 bytes (EOF); until epoll reports new
// bytes, its next read on the socket is tried again. In a request/response exchange the next read is
// nearly always too early: the HTTP/1.1 server's watch for the client's next request (or its going away)
// starts right after the request was read, and the client sends nothing more until it has its response.
// So each HTTP/1.1 exchange paid one recv that failed with EAGAIN (`strace -c`: 5.5 syscalls per
// request against haproxy's 4.5).
//
// recv_drained() is async_read_some for a plain tcp::socket whose operation tells the reactor, the
// moment its recv returns fewer bytes than asked for, that the socket is empty (the reactor's
// "done_and_exhausted": the same thing Asio's own read reports at EOF). The reactor then skips the
// speculative recv of the next read on that socket, whoever starts it, until epoll reports the socket
// readable again; as the descriptor stays registered edge-triggered for input, that costs no epoll_ctl.
// Bytes that arrive between the short read and the next read raise an edge that the next epoll_wait
// delivers, and the waiting read performs then: nothing is missed, and nothing changes for the caller.
//
// This uses Asio's reactor interface (boost/asio/detail), which is not part of its documented API; the
// project builds against exactly Boost 1.81 (CMakeLists.txt), and any other version (or a reactor other
// than epoll) falls back to the ordinary async_read_some.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <type_traits>

#include <boost/version.hpp>

#include "proxy/asio.h"

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define SLUICE_RECV_DRAINED 1
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#else
#define SLUICE_RECV_DRAINED 0
#endif

namespace sluice::proxy {

#if SLUICE_RECV_DRAINED
namespace recv_detail {

namespace ad = asio::detail;

// The socket's reactor registration (its descriptor and per-descriptor state) is a protected member of
// basic_socket; a pointer to it may be formed through a derived class.
struct SocketState : tcp::socket {
  static auto& of(tcp::socket& s) { return (s.*(&SocketState::impl_)).get_implementation(); }
};

// One recv(MSG_DONTWAIT) into one buffer, performed by the reactor at once and again whenever epoll
// reports the socket readable.
template <class Handler, class IoExecutor>
class RecvOp final : public ad::reactor_op {
 public:
  BOOST_ASIO_DEFINE_HANDLER_PTR(RecvOp);

  RecvOp(int fd, asio::mutable_buffer buffer, Handler& handler, const IoExecutor& io_ex)
      : ad::reactor_op(error_code(), &RecvOp::do_perform, &RecvOp::do_complete),
        fd_(fd),
        buffer_(buffer),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  static status do_perform(ad::reactor_op* base) {
    auto* o = static_cast<RecvOp*>(base);
    while (true) {
      const ssize_t n = ::recv(o->fd_, o->buffer_.data(), o->buffer_.size(), MSG_DONTWAIT);
      if (n > 0) {
        o->bytes_transferred_ = static_cast<std::size_t>(n);
        return o->bytes_transferred_ < o->buffer_.size() ? done_and_exhausted : done;
      }
      if (n == 0) {
        o->ec_ = asio::error::eof;
        return done_and_exhausted;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return not_done;
      o->ec_.assign(errno, asio::error::get_system_category());
      return done;
    }
  }

  // As Asio's own operations complete: the handler is moved out and the operation's memory freed
  // before the upcall; `owner` is null when the io_context is being destroyed.
  static void do_complete(void* owner, ad::operation* base, const error_code&, std::size_t) {
    auto* o = static_cast<RecvOp*>(base);
    ptr p = {std::addressof(o->handler_), o, o};
    ad::handler_work<Handler, IoExecutor> w(std::move(o->work_));
    ad::binder2<Handler, error_code, std::size_t> handler(o->handler_, o->ec_, o->bytes_transferred_);
    p.h = std::addressof(handler.handler_);
    p.reset();
    if (owner) {
      ad::fenced_block b(ad::fenced_block::half);
      w.complete(handler, handler.handler_);
    }
  }

 private:
  int fd_;
  asio::mutable_buffer buffer_;
  Handler handler_;
  ad::handler_work<Handler, IoExecutor> work_;
};

// Per-operation cancellation (a coroutine's cancellation slot): takes the operation off the reactor's
// queue, which completes it with operation_aborted.
class CancelRecv {
 public:
  CancelRecv(ad::reactor& reactor, ad::reactor::per_descriptor_data& data, int fd)
      : reactor_(reactor), data_(data), fd_(fd) {}
  void operator()(asio::cancellation_type_t type) {
    using asio::cancellation_type;
    if (!!(type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)))
      reactor_.cancel_ops_by_key(fd_, data_, ad::reactor::read_op, this);
  }

 private:
  ad::reactor& reactor_;
  ad::reactor::per_descriptor_data& data_;
  int fd_;
};

struct InitiateRecv {
  tcp::socket& socket;

  template <class Handler>
  void operator()(Handler&& handler, asio::mutable_buffer buffer) const {
    using Op = RecvOp<std::decay_t<Handler>, tcp::socket::executor_type>;
    auto& state = SocketState::of(socket);
    auto& reactor = asio::use_service<ad::reactor>(asio::query(socket.get_executor(), asio::execution::context));
    const bool continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
    auto slot = asio::get_associated_cancellation_slot(handler);
    typename Op::ptr p = {std::addressof(handler), Op::ptr::allocate(handler), nullptr};
    p.p = new (p.v) Op(state.socket_, buffer, handler, socket.get_executor());
    if (slot.is_connected())
      p.p->cancellation_key_ = &slot.template emplace<CancelRecv>(reactor, state.reactor_data_, state.socket_);
    reactor.start_op(ad::reactor::read_op, state.socket_, state.reactor_data_, p.p, continuation, true);
    p.v = p.p = nullptr;
  }
};

}  // namespace recv_detail
#endif

// async_read_some(socket, buffer) that leaves the socket marked empty after a short read (above).
// An empty buffer completes at once with 0 bytes, as Asio's read does.
template <class Token>
auto recv_drained(tcp::socket& socket, asio::mutable_buffer buffer, Token&& token) {
#if SLUICE_RECV_DRAINED
  if (buffer.size() > 0)
    return asio::async_initiate<Token, void(error_code, std::size_t)>(recv_detail::InitiateRecv{socket}, token,
                                                                      buffer);
#endif
  return socket.async_read_some(buffer, std::forward<Token>(token));
}

// A stream's read_some: recv_drained() on a plain socket, the stream's own otherwise.
template <class Stream, class Token>
auto read_some(Stream& stream, asio::mutable_buffer buffer, Token&& token) {
  if constexpr (std::is_same_v<Stream, tcp::socket>) return recv_drained(stream, buffer, std::forward<Token>(token));
  else return stream.async_read_some(buffer, std::forward<Token>(token));
}

}  // namespace sluice::proxy
