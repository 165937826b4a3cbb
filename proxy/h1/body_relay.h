// Streams one message body from a source socket to a destination socket through a fixed buffer,
// re-framing it (length, chunked with trailers, or until close). Sequential read-then-write gives
// back-pressure for free: nothing is read faster than the destination accepts it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "proxy/downstream.h"
#include "proxy/h1/message.h"

namespace sluice::proxy::h1 {

// A body buffer allocated on first use: most responses arrive whole with their head and never need one,
// so idle and small-response connections cost no body memory.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(std::size_t size) : size_(size) {}
  std::span<char> get() {
    if (!data_) data_ = std::make_unique_for_overwrite<char[]>(size_);
    return {data_.get(), size_};
  }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t size_;
};

struct RelayProgress {
  std::uint64_t bytes = 0;                   // body bytes written to the destination
  Clock::time_point* last_write = nullptr;   // refreshed on every write, for the idle timeout
};

// `head`, when non-empty, is written before (and in the same write as) the first body bytes.
// `header_fields` is how many fields the head had, so fields the parser added later are trailers.
// Instantiated for client → app (Downstream → tcp::socket or an h2c stream) and app → client.
template <bool isRequest, class Src, class Dst>
asio::awaitable<error_code> relay_body(Src& src, beast::flat_buffer& src_buffer,
                                       http::parser<isRequest, http::buffer_body>& parser,
                                       Framing in, Dst& dst, Framing out,
                                       ScratchBuffer& scratch, std::string& head,
                                       std::size_t header_fields, RelayProgress& progress);

using TrailerList = std::vector<std::pair<std::string, std::string>>;

// One piece of a body in framing `out`, after `head` (in the same write) while that is not empty.
// For Downstream (the client).
template <class Dst>
asio::awaitable<error_code> write_body_piece(Dst& dst, std::string& head, Framing out, asio::const_buffer data,
                                             RelayProgress& progress);
// The end of a body: the last chunk with `trailers` when chunked; `head` if it is still unwritten.
template <class Dst>
asio::awaitable<error_code> end_body(Dst& dst, std::string& head, Framing out, const TrailerList& trailers);

// Writes `head` alone (when a body cannot be merged with it).
// For tcp::socket (the app) and Downstream (the client).
template <class Dst>
asio::awaitable<error_code> write_all(Dst& dst, std::string_view bytes);

}  // namespace sluice::proxy::h1
