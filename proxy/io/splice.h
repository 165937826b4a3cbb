// Body bytes moved from one TCP socket to another by the kernel, never through sluice's memory.
//
// A relay that reads into a buffer and writes it out costs two copies of every byte: recv(2) copies out
// of the kernel, send(2) copies back in. splice(2) moves the pages the bytes arrived in into a pipe, and
// from the pipe into the other socket's send queue, by reference: no copy at all on sluice's side (the
// sending and the receiving peers still copy theirs). On a 1 MiB body that is most of a proxy's CPU.
//
// The forwarder uses it for a body that passes through unchanged: a known length (Content-Length) with
// no TLS and no framing to add or remove on either side, once the codecs hold none of its bytes in
// their buffers (ServerExchange / ClientExchange::raw_body_in and raw_body_out): request bodies always,
// responses with SLUICE_SPLICE_RESPONSES (proxy/exchange/config.h says why not by default). Every other body is
// copied through the codecs as before.
//
// Each splice is tried at once; only when it cannot proceed (EAGAIN) does the relay wait for the socket
// in the event loop (edge_wait.h). A relay that never has to wait gives the loop back every kYieldEvery pieces, so that
// one fast upload cannot hold a worker for the whole of its body. A splice into a socket the peer has
// reset raises SIGPIPE, as a plain write would: the process ignores it (app/main.cpp) and sees EPIPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "proxy/io/asio.h"

namespace sluice::proxy {

// A pipe both ends of which belong to one relay at a time; it is empty whenever it is idle.
class SplicePipe {
 public:
  // Null when none can be made (the process ran out of descriptors): the caller copies instead.
  static std::unique_ptr<SplicePipe> make(std::size_t bytes);
  ~SplicePipe();
  SplicePipe(const SplicePipe&) = delete;
  SplicePipe& operator=(const SplicePipe&) = delete;

  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  std::size_t capacity() const { return capacity_; }
  std::size_t held = 0;  // bytes in it: not 0 only between a splice in and the splice out that empties it

 private:
  SplicePipe(int read_end, int write_end, std::size_t capacity);
  int fds_[2];
  std::size_t capacity_;
};

// A worker's idle pipes: making one costs a pipe2(2) (and an fcntl(2) to size it), so they are kept
// for the next relay. One thread only.
class SplicePipes {
 public:
  // `pipe_bytes`: what one splice moves at most (rounded to pages); `max_idle`: pipes kept.
  SplicePipes(std::size_t pipe_bytes, std::size_t max_idle);
  std::unique_ptr<SplicePipe> take();
  // Kept for reuse when it is empty and there is room; closed otherwise (bytes of a broken-off relay).
  void give_back(std::unique_ptr<SplicePipe> pipe);
  std::size_t idle_count() const { return idle_.size(); }

 private:
  std::size_t pipe_bytes_;
  std::size_t max_idle_;
  std::vector<std::unique_ptr<SplicePipe>> idle_;
};

// What one step of a relay did.
struct SpliceResult {
  std::size_t moved = 0;   // bytes delivered to `to`
  error_code read_error;   // reading `from` failed: eof (it ended early), a reset, operation_aborted
  error_code write_error;  // writing `to` failed: the peer is gone, operation_aborted
};

// One direction of one exchange's body, moved by the kernel. It takes a pipe from `pipes` when it is
// first used and gives it back when it is destroyed.
class BodySplice {
 public:
  static constexpr unsigned kYieldEvery = 16;  // pieces in a row without waiting, then the loop runs others

  explicit BodySplice(SplicePipes& pipes) : pipes_(pipes) {}
  ~BodySplice();
  BodySplice(const BodySplice&) = delete;
  BodySplice& operator=(const BodySplice&) = delete;

  // Whether it can work: it has a pipe, or got one now. False: copy instead.
  bool ready();
  // Moves what has arrived of the next `max` bytes of `from` (waiting until some has) and returns once
  // all of it reached `to`, or one side failed. Bytes past `max` stay in `from`'s socket.
  asio::awaitable<SpliceResult> move_some(tcp::socket& from, tcp::socket& to, std::uint64_t max);

 private:
  SplicePipes& pipes_;
  std::unique_ptr<SplicePipe> pipe_;
  unsigned streak_ = 0;  // pieces moved since the last wait or yield
};

}  // namespace sluice::proxy
