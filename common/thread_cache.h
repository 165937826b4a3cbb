// Per-thread free lists in front of malloc for the small blocks a request churns through: coroutine
// frames, Asio's operations, header fields, nghttp2's stream state. A worker serving 500 concurrent
// exchanges frees and allocates thousands of such blocks in bursts; glibc's own per-thread cache holds
// 7 blocks of each size, so most calls fell through to its bins (a quarter of sluice's instructions in
// h2c; bench/README.md, "A free list per thread"). Here a thread keeps up to a byte budget of freed
// blocks in 128 size classes (16 B steps up to 2 KiB) and hands them back with a pop. When the budget
// is full, blocks of other sizes are given back to malloc in turn, so sizes no longer asked for drain.
//
// Every block is a genuine malloc block (the size rounded up to its class), so free() on one is always
// right and the cache is only a front: memory it holds is memory glibc would be holding in its bins.
// A block freed on another thread joins that thread's lists. When a thread ends, its lists go back to
// malloc. Built with a sanitizer (SLUICE_THREAD_CACHE=0) every call is plain malloc/free, so ASan and
// TSan see each allocation.
//
// The sluice binary routes the global operator new/delete here (app/operator_new.cpp), and Asio with
// them (its aligned allocation is turned off: BOOST_ASIO_DISABLE_STD_ALIGNED_ALLOC); the h2 codecs give
// nghttp2 the same functions (h2::Wire). Budget: SLUICE_THREAD_CACHE_KIB (default 4096 per thread; 0
// turns the cache off), read once at the first allocation. 4 MiB is what a worker with 500 h2 streams
// in flight frees and reallocates between two turns of the same stream (bench/README.md).
#pragma once

#include <cstddef>

namespace sluice::memory {

// Never null: throws std::bad_alloc (after the new-handler, as operator new does) when out of memory.
void* allocate(std::size_t size);
// Null when out of memory, like malloc.
void* try_allocate(std::size_t size) noexcept;
// `size` is what was asked of allocate() for this block (sized delete).
void deallocate(void* block, std::size_t size) noexcept;
// Any block from allocate(), try_allocate() or malloc/realloc.
void deallocate(void* block) noexcept;

// What the calling thread's lists hold, in bytes, and their budget (for tests and the bench notes).
std::size_t cached_bytes() noexcept;
std::size_t budget_bytes() noexcept;
// Hands the calling thread's lists back to malloc.
void release_thread_cache() noexcept;

inline constexpr std::size_t kLargestCachedBlock = 2048;

}  // namespace sluice::memory
