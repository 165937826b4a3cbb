// One thread for all instances: output is read as it comes (non-blocking), exits arrive through pidfds.
#include "runtime/reactor.h"

#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <future>

#include "runtime/line_splitter.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sluice::runtime {

namespace asio = boost::asio;

Reactor::Reactor() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}

Reactor::~Reactor() {
  work_.reset();
  io_.stop();
  thread_.join();
}

void Reactor::run_sync(const std::function<void()>& fn) {
  // From an event callback (the reactor thread itself) waiting for a post would never end.
  if (on_reactor_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  asio::post(io_, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

struct Watch::State {
  State(asio::io_context& io, int out_fd, int err_fd, int pid_fd)
      : pipes{asio::posix::stream_descriptor(io, out_fd), asio::posix::stream_descriptor(io, err_fd)},
        pidfd(io, pid_fd), retry(io) {}
  asio::posix::stream_descriptor pipes[2];
  LineSplitter splitters[2];
  asio::posix::stream_descriptor pidfd;
  asio::steady_timer retry;  // reaping again when the pidfd was readable before the zombie was reapable
  WatchCallbacks cb;
  bool closed = false;
  bool exited = false;
};

std::shared_ptr<Watch> Watch::open(Reactor& reactor, int out_fd, int err_fd, int pidfd, WatchCallbacks cb) {
  auto state = std::make_unique<State>(reactor.io(), out_fd, err_fd, ::dup(pidfd));
  state->cb = std::move(cb);
  for (auto& p : state->pipes) p.non_blocking(true);
  return std::shared_ptr<Watch>(new Watch(std::move(state)));
}

Watch::Watch(std::unique_ptr<State> s) : s_(std::move(s)) {}
Watch::~Watch() = default;

void Watch::start() {
  wait_pipe(0);
  wait_pipe(1);
  wait_exit();
}

bool Watch::drain(int index) {
  auto& pipe = s_->pipes[index];
  if (!pipe.is_open()) return false;
  char buf[16 * 1024];
  auto stream = index == 0 ? Stream::out : Stream::err;
  auto emit = [&](std::string_view line) { s_->cb.on_line(stream, line); };
  while (true) {
    boost::system::error_code ec;
    std::size_t n = pipe.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return true;
    if (ec == asio::error::interrupted) continue;
    if (ec) {  // EOF: every writer (the app and whatever it forked) closed the pipe
      s_->splitters[index].finish(emit);
      pipe.close(ec);
      return false;
    }
    s_->splitters[index].feed(std::string_view(buf, n), emit);
  }
}

void Watch::wait_pipe(int index) {
  s_->pipes[index].async_wait(asio::posix::stream_descriptor::wait_read,
                              [self = shared_from_this(), index](boost::system::error_code ec) {
                                if (ec || self->s_->closed) return;
                                if (self->drain(index)) self->wait_pipe(index);
                              });
}

void Watch::wait_exit() {
  s_->pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                       [self = shared_from_this()](boost::system::error_code ec) {
                         if (!ec && !self->s_->closed) self->reap();
                       });
}

void Watch::reap() {
  siginfo_t info{};
  int rc;
  do {
    rc = ::waitid(static_cast<idtype_t>(P_PIDFD), s_->pidfd.native_handle(), &info, WEXITED);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EAGAIN) {
    // Recent kernels wake pidfd pollers in do_exit, a moment before the zombie can be reaped (and the pidfd
    // is non-blocking: Asio set it so); seen reapable 2 ms later. The edge is spent, so retry by timer.
    s_->retry.expires_after(std::chrono::milliseconds(1));
    s_->retry.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->s_->closed) self->reap();
    });
    return;
  }
  // What the app wrote before dying is reported before its exit.
  drain(0);
  drain(1);
  s_->exited = true;
  if (rc != 0) {  // not ours to reap any more (ECHILD): gone, with its status unknown
    s_->cb.on_exit(-1, 0);
    return;
  }
  bool by_signal = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
  s_->cb.on_exit(by_signal ? -1 : info.si_status, by_signal ? info.si_status : 0);
}

void Watch::close() {
  if (s_->closed) return;
  for (int i = 0; i < 2; ++i) drain(i);
  auto emit_for = [this](Stream st) { return [this, st](std::string_view line) { s_->cb.on_line(st, line); }; };
  s_->splitters[0].finish(emit_for(Stream::out));
  s_->splitters[1].finish(emit_for(Stream::err));
  s_->closed = true;
  boost::system::error_code ec;
  for (auto& p : s_->pipes) p.close(ec);
  s_->pidfd.close(ec);
  s_->retry.cancel();
}

}  // namespace sluice::runtime
