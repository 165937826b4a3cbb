// The shared nghttp2 plumbing; see wire.h.
#include "proxy/codec/h2/wire.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include "common/ascii.h"
#include "common/thread_cache.h"

namespace sluice::proxy::h2 {
namespace {

std::size_t page_size() {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

// aligned_alloc() takes a size that is a multiple of the alignment (C11; ASan holds glibc to it).
std::size_t Wire::frame_buffer_span() { return (kFrameBufferBytes + page_size() - 1) / page_size() * page_size(); }

// nghttp2's own allocations (four per stream: its stream, the header block's buffers) come from the same
// per-thread free lists as the rest of an exchange. nghttp2 1.52 takes its outbound frame buffer with
// realloc(nullptr, kFrameBufferBytes) as the session is made: that one is page-aligned instead.
void* Wire::ng_malloc(std::size_t size, void*) { return memory::try_allocate(size); }
void Wire::ng_free(void* block, void* wire) {
  auto& w = *static_cast<Wire*>(wire);
  if (block && block == w.frame_buffer_) {
    w.frame_buffer_ = nullptr;
    std::free(block);
    return;
  }
  memory::deallocate(block);
}
void* Wire::ng_calloc(std::size_t count, std::size_t size, void*) {
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  void* block = memory::try_allocate(count * size);
  if (block) std::memset(block, 0, count * size);
  return block;
}
// Every block is a malloc block, so glibc's realloc takes it as it is.
void* Wire::ng_realloc(void* block, std::size_t size, void* wire) {
  auto& w = *static_cast<Wire*>(wire);
  if (!block && size == kFrameBufferBytes && !w.frame_buffer_) {
    w.frame_buffer_ = std::aligned_alloc(page_size(), frame_buffer_span());
    return w.frame_buffer_;
  }
  if (block && block == w.frame_buffer_) w.frame_buffer_ = nullptr;  // resized: an ordinary block from now on
  return std::realloc(block, size);
}

void Wire::rest() {
  if (writing_ || batch_bytes_ != 0) return;
  if (frame_buffer_) ::madvise(frame_buffer_, frame_buffer_span(), MADV_DONTNEED);
  frames_ = std::string();
  flat_ = std::string();
  pieces_ = {};
  taken_ = {};
  gather_ = {};
  slices_ = {};
}

std::size_t SendQueue::append(asio::const_buffer data) {
  constexpr std::size_t kSmallestRing = 1024;  // served from malloc's per-thread cache (larger blocks are not)
  if (in_flight_ + unsent_ == 0 && size_ < std::min(data.size(), capacity_)) {
    size_ = std::min(capacity_, std::max(kSmallestRing, std::bit_ceil(data.size())));
    ring_ = std::make_unique_for_overwrite<char[]>(size_);
    start_ = 0;
  }
  const std::size_t n = std::min(data.size(), room());
  if (n == 0) return 0;
  const auto* from = static_cast<const char*>(data.data());
  const std::size_t end = (start_ + in_flight_ + unsent_) % size_;
  const std::size_t first = std::min(n, size_ - end);
  std::memcpy(ring_.get() + end, from, first);
  std::memcpy(ring_.get(), from + first, n - first);
  unsent_ += n;
  return n;
}

void SendQueue::take(std::size_t n, std::vector<asio::const_buffer>& out) {
  const std::size_t begin = (start_ + in_flight_) % size_;
  const std::size_t first = std::min(n, size_ - begin);
  out.emplace_back(ring_.get() + begin, first);
  if (n > first) out.emplace_back(ring_.get(), n - first);
  in_flight_ += n;
  unsent_ -= n;
}

void SendQueue::release(std::size_t n) {
  start_ = (start_ + n) % size_;
  in_flight_ -= n;
  space.notify();
}

Wire::~Wire() {
  if (ng_) nghttp2_session_del(ng_);
}

namespace {

int reset_stream(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t, const uint8_t*, size_t, uint8_t,
                 void*) {
  return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

}  // namespace

nghttp2_session* new_session(const SessionSetup& setup, void* owner, nghttp2_mem* mem) {
  const WireCallbacks& c = setup.callbacks;
  nghttp2_session_callbacks* cb;
  if (nghttp2_session_callbacks_new(&cb) != 0) return nullptr;
  if (c.on_begin_headers) nghttp2_session_callbacks_set_on_begin_headers_callback(cb, c.on_begin_headers);
  if (c.on_header) nghttp2_session_callbacks_set_on_header_callback(cb, c.on_header);
  if (c.on_frame_recv) nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c.on_frame_recv);
  if (c.on_data_chunk) nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c.on_data_chunk);
  if (c.on_stream_close) nghttp2_session_callbacks_set_on_stream_close_callback(cb, c.on_stream_close);
  if (c.on_begin_frame) nghttp2_session_callbacks_set_on_begin_frame_callback(cb, c.on_begin_frame);
  if (c.on_invalid_frame) nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, c.on_invalid_frame);
  if (c.on_frame_not_send) nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, c.on_frame_not_send);
  if (setup.send_data) nghttp2_session_callbacks_set_send_data_callback(cb, setup.send_data);
  if (setup.reset_on_invalid_header) nghttp2_session_callbacks_set_on_invalid_header_callback(cb, reset_stream);
  nghttp2_option* opt;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    return nullptr;
  }
  if (!setup.auto_window_updates) nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_settings(opt, 32);
  if (setup.configure) setup.configure(opt);
  nghttp2_session* ng = nullptr;
  const int rv = setup.role == SessionRole::server ? nghttp2_session_server_new3(&ng, cb, owner, opt, mem)
                                                   : nghttp2_session_client_new3(&ng, cb, owner, opt, mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) return nullptr;
  nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, setup.settings.data(), setup.settings.size());
  if (setup.connection_window > 0)
    nghttp2_session_set_local_window_size(ng, NGHTTP2_FLAG_NONE, 0, setup.connection_window);
  return ng;
}

bool Wire::start(Role role, const WireCallbacks& callbacks, void* owner,
                 const std::vector<nghttp2_settings_entry>& settings, std::int32_t connection_window,
                 const std::function<void(nghttp2_option*)>& configure) {
  ng_ = new_session({.role = role,
                     .callbacks = callbacks,
                     .settings = settings,
                     .connection_window = connection_window,
                     .send_data = &Wire::send_data,
                     .configure = configure},
                    owner, &mem_);
  return ng_ != nullptr;
}

int Wire::feed(const char* data, std::size_t n) {
  auto rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(data), n);
  write_wanted_.notify();
  return rv < 0 ? static_cast<int>(rv) : 0;
}

nghttp2_data_provider Wire::provider(SendQueue& q) {
  q.wire_ = this;
  return {.source = {.ptr = &q}, .read_callback = &Wire::read_data};
}

void Wire::resume(std::int32_t stream_id, SendQueue& q) {
  if (q.deferred) {
    q.deferred = false;
    nghttp2_session_resume_data(ng_, stream_id);
  }
  write_wanted_.notify();
}

void Wire::retire(std::unique_ptr<SendQueue> q) {
  if (q && q->in_flight() > 0) retired_.push_back(std::move(q));
}

ssize_t Wire::read_data(nghttp2_session* ng, std::int32_t id, uint8_t*, size_t length, uint32_t* flags,
                        nghttp2_data_source* src, void*) {
  auto& q = *static_cast<SendQueue*>(src->ptr);
  const std::size_t n = std::min(length, q.unsent());
  if (n == q.unsent() && q.done) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!q.trailers.empty()) {
      std::vector<std::string> names;
      std::vector<nghttp2_nv> nva;
      names.reserve(q.trailers.size());
      nva.reserve(q.trailers.size());
      for (const auto& [name, value] : q.trailers) {
        names.push_back(ascii_lower(name));
        nva.push_back(nv(names.back(), value));
      }
      if (nghttp2_submit_trailer(ng, id, nva.data(), nva.size()) == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  } else if (n == 0) {
    q.deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  if (n > 0) *flags |= NGHTTP2_DATA_FLAG_NO_COPY;  // send_data() gathers the bytes from the ring
  return static_cast<ssize_t>(n);
}

int Wire::send_data(nghttp2_session*, nghttp2_frame*, const uint8_t* framehd, size_t length,
                    nghttp2_data_source* src, void*) {
  // No padding is ever asked for, so the frame is its 9-byte header and `length` bytes of the ring.
  auto& q = *static_cast<SendQueue*>(src->ptr);
  Wire& w = *q.wire_;
  w.add_frame_bytes(framehd, 9);
  w.slices_.clear();
  q.take(length, w.slices_);
  for (const auto& s : w.slices_) w.pieces_.push_back({static_cast<const char*>(s.data()), 0, s.size()});
  w.taken_.emplace_back(&q, length);
  w.batch_bytes_ += length;
  if (w.on_progress) w.on_progress();
  return 0;
}

void Wire::add_frame_bytes(const uint8_t* data, std::size_t n) {
  if (!pieces_.empty() && !pieces_.back().ring && pieces_.back().offset + pieces_.back().size == frames_.size())
    pieces_.back().size += n;
  else
    pieces_.push_back({nullptr, frames_.size(), n});
  frames_.append(reinterpret_cast<const char*>(data), n);
  batch_bytes_ += n;
}

bool Wire::collect(std::size_t limit) {
  while (batch_bytes_ < limit) {
    const uint8_t* data = nullptr;
    auto n = nghttp2_session_mem_send(ng_, &data);  // may call send_data() for DATA frames
    if (n < 0) return false;
    if (n == 0) break;
    add_frame_bytes(data, static_cast<std::size_t>(n));
  }
  return true;
}

void Wire::written() {
  for (auto [q, n] : taken_) q->release(n);
  taken_.clear();
  pieces_.clear();
  frames_.clear();
  batch_bytes_ = 0;
  std::erase_if(retired_, [](const auto& q) { return q->in_flight() == 0; });
}

}  // namespace sluice::proxy::h2
