// Waiting for a socket after a read or write on it failed with EAGAIN, without a system call.
//
// Asio's socket.async_wait() cannot assume anything about the socket, so it re-arms the descriptor
// with epoll_ctl(EPOLL_CTL_MOD) every time, which makes epoll report it at once if it is ready already.
// Where the caller has just seen EAGAIN itself (OpenSSL's read or write on its own descriptor, a
// splice), that call is wasted: the socket is registered edge-triggered for input (and, once anything
// waited for room, for output), so whatever arrives after the EAGAIN raises an edge that the worker's
// next epoll_wait delivers. `wait_after_eagain()` queues a wait on the reactor the way Asio queues its
// own reads (the operation is first "tried", which for a wait does nothing and says "not yet"), and the
// reactor completes it on that edge, or on an error or hang-up, or when the socket is cancelled or closed.
// On HTTP/1.1 over TLS that is one system call less per request (6.1 -> 5.1 in `strace -c`).
//
// The precondition matters: after an EAGAIN only. A socket that already has bytes (or room) and reported
// them before the wait began would wait for an edge that has already passed.
//
// This uses Asio's reactor interface (boost/asio/detail), which is not part of its documented API; the
// project builds against exactly Boost 1.81 (CMakeLists.txt), and any other version (or a reactor other
// than epoll) falls back to async_wait. The worker's io_context runs on one thread, as everywhere here.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>

#include <boost/version.hpp>

#include "common/thread_cache.h"
#include "proxy/io/asio.h"

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define SLUICE_EDGE_WAIT 1
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#else
#define SLUICE_EDGE_WAIT 0
#endif

namespace sluice::proxy {

#if SLUICE_EDGE_WAIT
namespace edge_detail {

namespace ad = asio::detail;

// The socket's reactor registration (its descriptor and per-descriptor state) is a protected member of
// basic_socket; a pointer to it may be formed through a derived class.
struct SocketState : tcp::socket {
  static auto& of(tcp::socket& s) { return (s.*(&SocketState::impl_)).get_implementation(); }
};

// Set while this thread is inside the reactor's start_op for a wait: the reactor's first try of the
// operation, which must not complete it.
inline thread_local bool starting = false;

template <class Handler, class IoExecutor>
class WaitOp final : public ad::reactor_op {
 public:
  // The operation's memory, as Asio's handler pointers hold it (`v` the memory, `p` the object), but taken
  // at its own size from the thread's free lists rather than through the handler's allocator. That one
  // hands out the block of the last operation freed on the thread whatever its size: a connection resting
  // in this wait kept the block of the read before it, 240 bytes where the wait needs 96 (heaptrack,
  // bench/README.md, "Memory per idle connection").
  struct ptr {
    Handler* h;
    WaitOp* v;
    WaitOp* p;
    ~ptr() { reset(); }
    static WaitOp* allocate(Handler&) { return static_cast<WaitOp*>(memory::allocate(sizeof(WaitOp))); }
    void reset() {
      if (p) {
        p->~WaitOp();
        p = nullptr;
      }
      if (v) {
        memory::deallocate(v, sizeof(WaitOp));
        v = nullptr;
      }
    }
  };

  WaitOp(Handler& handler, const IoExecutor& io_ex)
      : ad::reactor_op(error_code(), &WaitOp::do_perform, &WaitOp::do_complete),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  // Tried at start: not yet. Tried by the reactor when epoll reports the socket: done.
  static status do_perform(ad::reactor_op*) { return starting ? not_done : done; }

  // As Asio's own operations complete: the handler is moved out and the operation's memory freed
  // before the upcall; `owner` is null when the io_context is being destroyed.
  static void do_complete(void* owner, ad::operation* base, const error_code&, std::size_t) {
    auto* o = static_cast<WaitOp*>(base);
    ptr p = {std::addressof(o->handler_), o, o};
    ad::handler_work<Handler, IoExecutor> w(std::move(o->work_));
    ad::binder1<Handler, error_code> handler(o->handler_, o->ec_);
    p.h = std::addressof(handler.handler_);
    p.reset();
    if (owner) {
      ad::fenced_block b(ad::fenced_block::half);
      w.complete(handler, handler.handler_);
    }
  }

 private:
  Handler handler_;
  ad::handler_work<Handler, IoExecutor> work_;
};

// Per-operation cancellation (a coroutine's cancellation slot): takes the operation off the reactor's
// queue, which completes it with operation_aborted.
class CancelWait {
 public:
  CancelWait(ad::reactor& reactor, ad::reactor::per_descriptor_data& data, int fd, int op_type)
      : reactor_(reactor), data_(data), fd_(fd), op_type_(op_type) {}
  void operator()(asio::cancellation_type_t type) {
    using asio::cancellation_type;
    if (!!(type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)))
      reactor_.cancel_ops_by_key(fd_, data_, op_type_, this);
  }

 private:
  ad::reactor& reactor_;
  ad::reactor::per_descriptor_data& data_;
  int fd_;
  int op_type_;
};

// Counts the io_contexts that have ended (their services are destroyed with them).
inline std::atomic<std::uint64_t> contexts_ended{0};
class EndWatch final : public ad::execution_context_service_base<EndWatch> {
 public:
  explicit EndWatch(asio::execution_context& context) : ad::execution_context_service_base<EndWatch>(context) {}
  ~EndWatch() override { contexts_ended.fetch_add(1, std::memory_order_release); }
  void shutdown() override {}
};

// The socket's reactor, looked up once per thread and io_context: use_service() walks the context's
// services under its mutex comparing type names, which costs about 200 instructions, a wait after EAGAIN a few dozen (1 % of
// an HTTP/1.1 request's instructions in the proxy). Any context's end drops every thread's entry: a new
// context may take the address of one that is gone.
inline ad::reactor& reactor_of(tcp::socket& socket) {
  struct Cached {
    asio::execution_context* context = nullptr;
    ad::reactor* reactor = nullptr;
    std::uint64_t ends = 0;
  };
  thread_local Cached cached;
  auto& context = asio::query(socket.get_executor(), asio::execution::context);
  const auto ends = contexts_ended.load(std::memory_order_acquire);
  if (cached.context != &context || cached.ends != ends) {
    asio::use_service<EndWatch>(context);
    cached = {&context, &asio::use_service<ad::reactor>(context), ends};
  }
  return *cached.reactor;
}

struct InitiateWait {
  tcp::socket& socket;

  // The operation keeps the socket's executor for the handler's work. A socket on an io_context (every
  // worker's) keeps that context's own executor, 8 bytes that track no work, instead of the polymorphic
  // one (56 bytes, with its work-tracking wrapper): 96 bytes an operation instead of 144, and a resting
  // connection's wait is one of them (bench/README.md, "Memory per idle connection").
  template <class Handler>
  void operator()(Handler&& handler, tcp::socket::wait_type what) const {
    if (auto* native = socket.get_executor().target<asio::io_context::executor_type>())
      start(std::forward<Handler>(handler), what, *native);
    else
      start(std::forward<Handler>(handler), what, socket.get_executor());
  }

  template <class Handler, class IoExecutor>
  void start(Handler&& handler, tcp::socket::wait_type what, const IoExecutor& io_ex) const {
    using Op = WaitOp<std::decay_t<Handler>, IoExecutor>;
    auto& state = SocketState::of(socket);
    auto& reactor = reactor_of(socket);
    const int op_type = what == tcp::socket::wait_write ? ad::reactor::write_op : ad::reactor::read_op;
    const bool continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
    auto slot = asio::get_associated_cancellation_slot(handler);
    typename Op::ptr p = {std::addressof(handler), Op::ptr::allocate(handler), nullptr};
    p.p = new (p.v) Op(handler, io_ex);
    if (slot.is_connected())
      p.p->cancellation_key_ = &slot.template emplace<CancelWait>(reactor, state.reactor_data_, state.socket_, op_type);
    starting = true;
    reactor.start_op(op_type, state.socket_, state.reactor_data_, p.p, continuation, true);
    starting = false;
    p.v = p.p = nullptr;
  }
};

}  // namespace edge_detail
#endif

// socket.async_wait(what, token) for a socket whose last read (wait_read) or write (wait_write) failed
// with EAGAIN just now; completes with the wait's error_code, as async_wait does.
template <class Token>
auto wait_after_eagain(tcp::socket& socket, tcp::socket::wait_type what, Token&& token) {
#if SLUICE_EDGE_WAIT
  if (what == tcp::socket::wait_read || what == tcp::socket::wait_write)
    return asio::async_initiate<Token, void(error_code)>(edge_detail::InitiateWait{socket}, token, what);
#endif
  return socket.async_wait(what, std::forward<Token>(token));
}

}  // namespace sluice::proxy
