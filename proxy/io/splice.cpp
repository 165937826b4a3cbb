// Body bytes moved by the kernel; see splice.h.
#include "proxy/io/splice.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "proxy/io/edge_wait.h"

namespace sluice::proxy {
namespace {

constexpr std::size_t kDefaultPipeBytes = 64 * 1024;  // Linux's default, assumed if the size cannot be read

error_code last_error() { return error_code(errno, asio::error::get_system_category()); }

// splice(2) between a socket and a pipe, never blocking (SPLICE_F_NONBLOCK covers the pipe; the socket
// is non-blocking too, as every socket Asio has waited on). -1 with errno set, as the call itself.
ssize_t splice_between(int from, int to, std::size_t bytes) {
  while (true) {
    const ssize_t n = ::splice(from, nullptr, to, nullptr, bytes, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n >= 0 || errno != EINTR) return n;
  }
}

// The socket must not block a splice: Asio makes a socket non-blocking on its first asynchronous
// operation, which every socket here has had; this is the guarantee, not the usual path.
error_code ensure_non_blocking(tcp::socket& s) {
  error_code ec;
  if (!s.native_non_blocking()) s.native_non_blocking(true, ec);
  return ec;
}

}  // namespace

std::unique_ptr<SplicePipe> SplicePipe::make(std::size_t bytes) {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return nullptr;
  int capacity = ::fcntl(fds[1], F_GETPIPE_SZ);
  // A size above /proc/sys/fs/pipe-max-size is refused to an unprivileged process: keep what it has.
  if (bytes != static_cast<std::size_t>(capacity)) {
    if (int set = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(bytes)); set > 0) capacity = set;
  }
  if (capacity <= 0) capacity = static_cast<int>(kDefaultPipeBytes);
  return std::unique_ptr<SplicePipe>(new SplicePipe(fds[0], fds[1], static_cast<std::size_t>(capacity)));
}

SplicePipe::SplicePipe(int read_end, int write_end, std::size_t capacity)
    : fds_{read_end, write_end}, capacity_(capacity) {}

SplicePipe::~SplicePipe() {
  ::close(fds_[0]);
  ::close(fds_[1]);
}

SplicePipes::SplicePipes(std::size_t pipe_bytes, std::size_t max_idle)
    : pipe_bytes_(std::clamp<std::size_t>(pipe_bytes, 4096, 1 << 20)), max_idle_(max_idle) {}

std::unique_ptr<SplicePipe> SplicePipes::take() {
  if (idle_.empty()) return SplicePipe::make(pipe_bytes_);
  auto p = std::move(idle_.back());
  idle_.pop_back();
  return p;
}

void SplicePipes::give_back(std::unique_ptr<SplicePipe> pipe) {
  if (pipe && pipe->held == 0 && idle_.size() < max_idle_) idle_.push_back(std::move(pipe));
}

BodySplice::~BodySplice() { pipes_.give_back(std::move(pipe_)); }

bool BodySplice::ready() {
  if (!pipe_) pipe_ = pipes_.take();
  return pipe_ != nullptr;
}

asio::awaitable<SpliceResult> BodySplice::move_some(tcp::socket& from, tcp::socket& to, std::uint64_t max) {
  SpliceResult r;
  SplicePipe& pipe = *pipe_;
  if (max == 0) co_return r;
  if ((r.read_error = ensure_non_blocking(from))) co_return r;
  if ((r.write_error = ensure_non_blocking(to))) co_return r;
  bool waited = false;
  // In: what has arrived, up to the pipe's size and `max`; wait only when nothing has.
  while (pipe.held == 0) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(max, pipe.capacity()));
    const ssize_t n = splice_between(from.native_handle(), pipe.write_end(), want);
    if (n > 0) {
      pipe.held = static_cast<std::size_t>(n);
      break;
    }
    if (n == 0) {
      r.read_error = asio::error::eof;
      co_return r;
    }
    if (errno != EAGAIN) {
      r.read_error = last_error();
      co_return r;
    }
    auto [ec] = co_await wait_after_eagain(from, tcp::socket::wait_read, use_nothrow);
    if (ec) {
      r.read_error = ec;
      co_return r;
    }
    waited = true;
  }
  // Out: all of it, waiting whenever the other side's send queue is full.
  while (pipe.held > 0) {
    const ssize_t n = splice_between(pipe.read_end(), to.native_handle(), pipe.held);
    if (n > 0) {
      pipe.held -= static_cast<std::size_t>(n);
      r.moved += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0 || errno != EAGAIN) {
      r.write_error = n == 0 ? error_code(asio::error::broken_pipe) : last_error();
      co_return r;
    }
    auto [ec] = co_await wait_after_eagain(to, tcp::socket::wait_write, use_nothrow);
    if (ec) {
      r.write_error = ec;
      co_return r;
    }
    waited = true;
  }
  if (waited) {
    streak_ = 0;
  } else if (++streak_ >= kYieldEvery) {
    streak_ = 0;
    co_await asio::post(from.get_executor(), asio::use_awaitable);
  }
  co_return r;
}

}  // namespace sluice::proxy
