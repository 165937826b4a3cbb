#include "common/thread_cache.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <iterator>
#include <cstdint>
#include <new>

#ifndef SLUICE_THREAD_CACHE
#define SLUICE_THREAD_CACHE 1
#endif

namespace sluice::memory {
namespace {

constexpr std::size_t kGranule = 16;  // glibc's alignment: every malloc block is a multiple of it
constexpr std::size_t kClasses = kLargestCachedBlock / kGranule;
static_assert(kClasses % 64 == 0, "the filled-class bitmap is whole words");
constexpr std::size_t kDefaultBudget = std::size_t{4096} * 1024;

[[maybe_unused]] constexpr std::size_t class_of(std::size_t size) { return size == 0 ? 0 : (size - 1) / kGranule; }
constexpr std::size_t class_bytes(std::size_t k) { return (k + 1) * kGranule; }

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible and constant-initialised, so reaching it costs no guard; the drain at thread
// exit is registered separately, on the first push.
struct Lists {
  enum State : unsigned char { unopened, open, closed };
  FreeBlock* head[kClasses];
  std::uint64_t filled[kClasses / 64];  // bit k: head[k] is not empty, so evict_one() need not look
  std::size_t bytes;
  std::size_t budget;
  std::size_t victim;  // where evict_one() looks first
  State state;
};
constinit thread_local Lists t_lists{};

std::size_t read_budget() noexcept {
  static constexpr std::size_t kUnread = ~std::size_t{0};
  static std::atomic<std::size_t> budget{kUnread};
  std::size_t b = budget.load(std::memory_order_relaxed);
  if (b != kUnread) return b;
  // app/main.cpp rejects a malformed value with the key named before any worker starts; this only
  // has to be safe (no allocation here: it runs inside operator new).
  b = kDefaultBudget;
  if (const char* text = std::getenv("SLUICE_THREAD_CACHE_KIB"); text && *text) {
    std::size_t kib = 0;
    const char* c = text;
    for (; *c >= '0' && *c <= '9' && kib <= (std::size_t{1} << 20); ++c) kib = kib * 10 + std::size_t(*c - '0');
    if (*c == '\0' && kib <= (std::size_t{1} << 20)) b = kib * 1024;
  }
  budget.store(b, std::memory_order_relaxed);
  return b;
}

void drain(Lists& l) noexcept {
  for (auto& head : l.head) {
    while (FreeBlock* f = head) {
      head = f->next;
      std::free(f);
    }
  }
  for (auto& word : l.filled) word = 0;
  l.bytes = 0;
}

struct ThreadEnd {
  ThreadEnd() = default;
  ThreadEnd(const ThreadEnd&) = delete;
  ThreadEnd& operator=(const ThreadEnd&) = delete;
  ~ThreadEnd() {
    drain(t_lists);
    t_lists.state = Lists::closed;  // blocks freed later in this thread's teardown go straight to free()
  }
};

bool open_lists(Lists& l) noexcept {
  if (l.state == Lists::closed) return false;
  l.budget = read_budget();
  if (l.budget == 0) {
    l.state = Lists::closed;
    return false;
  }
  static thread_local ThreadEnd end;  // constructed here, once per thread: registers the drain
  (void)end;
  l.state = Lists::open;
  return true;
}

constexpr std::uint64_t class_bit(std::size_t k) { return std::uint64_t{1} << (k % 64); }

void note_filled(Lists& l, std::size_t k) noexcept { l.filled[k / 64] |= class_bit(k); }
void note_popped(Lists& l, std::size_t k) noexcept {
  if (!l.head[k]) l.filled[k / 64] &= ~class_bit(k);
}

// The first non-empty class at or after `from`, going round; kClasses when all are empty.
std::size_t first_filled(const std::uint64_t (&filled)[kClasses / 64], std::size_t from) noexcept {
  constexpr std::size_t kWords = kClasses / 64;
  for (std::size_t i = 0; i <= kWords; ++i) {  // from's word again last, for the classes below `from`
    const std::size_t w = (from / 64 + i) % kWords;
    std::uint64_t bits = filled[w];
    if (i == 0) bits &= ~std::uint64_t{0} << (from % 64);
    if (bits) return w * 64 + std::size_t(std::countr_zero(bits));
  }
  return kClasses;
}

// Full: the next block, round-robin, of another size goes back to malloc, so the lists of sizes no
// longer asked for (a burst's, or blocks nghttp2 grew with realloc) drain instead of holding the budget.
bool evict_one(Lists& l, std::size_t keep) noexcept {
  std::uint64_t others[kClasses / 64];
  std::copy(std::begin(l.filled), std::end(l.filled), others);
  others[keep / 64] &= ~class_bit(keep);
  const std::size_t v = first_filled(others, l.victim);
  if (v == kClasses) return false;
  FreeBlock* f = l.head[v];
  l.head[v] = f->next;
  note_popped(l, v);
  l.bytes -= class_bytes(v);
  l.victim = (v + 1) % kClasses;
  std::free(f);
  return true;
}

void link(Lists& l, FreeBlock* f, std::size_t k) noexcept {
  f->next = l.head[k];
  l.head[k] = f;
  note_filled(l, k);
  l.bytes += class_bytes(k);
}

// A push that has to open the lists or make room first (in a busy worker, about one push in 30).
[[gnu::noinline]] void push_slow(void* block, std::size_t k) noexcept {
  Lists& l = t_lists;
  if (l.state != Lists::open && !open_lists(l)) {
    std::free(block);
    return;
  }
  while (l.bytes + class_bytes(k) > l.budget) {
    if (!evict_one(l, k)) {
      std::free(block);
      return;
    }
  }
  link(l, static_cast<FreeBlock*>(block), k);
}

[[maybe_unused]] inline void push(void* block, std::size_t k) noexcept {
  Lists& l = t_lists;
  if (l.state == Lists::open && l.bytes + class_bytes(k) <= l.budget) [[likely]]
    return link(l, static_cast<FreeBlock*>(block), k);
  push_slow(block, k);
}

// The bytes an unsized delete may reuse. glibc keeps a block's chunk size in the word just before it,
// with three flag bits below (malloc/malloc.c: PREV_INUSE 1, IS_MMAPPED 2, NON_MAIN_ARENA 4), and an
// in-use block of an ordinary chunk holds the chunk size less that one word. malloc_usable_size() reads
// the same word but also the next chunk's header, to see the block is in use: a line nobody else
// touches while a coroutine frame is freed, and the commonest cache miss per h2 request
// (bench/README.md, "Unsized frees"). The layout is checked against malloc_usable_size() once per
// process, on blocks of several sizes; if it ever differs, malloc_usable_size() is what is used.
enum class Layout : unsigned char { unchecked, header, library };
constinit std::atomic<Layout> g_layout{Layout::unchecked};

constexpr std::size_t kWord = sizeof(std::size_t);
constexpr std::size_t kIsMmapped = 2;

std::size_t header_word(void* block) noexcept {
  // Through an integer: the word lies before the block, outside anything the compiler may assume it
  // knows the bounds of.
  return *reinterpret_cast<const std::size_t*>(reinterpret_cast<std::uintptr_t>(block) - kWord);
}

std::size_t usable_from_header(std::size_t word) noexcept { return (word & ~std::size_t{7}) - kWord; }

[[gnu::cold, gnu::noinline]] Layout check_layout() noexcept {
  Layout layout = Layout::header;
  for (std::size_t size : {1, 24, 100, 500, 2000}) {
    void* block = std::malloc(size);
    if (!block) return Layout::library;  // ask again another time
    const std::size_t word = header_word(block);
    if ((word & kIsMmapped) != 0 || usable_from_header(word) != malloc_usable_size(block)) layout = Layout::library;
    std::free(block);
  }
  g_layout.store(layout, std::memory_order_relaxed);
  return layout;
}

[[maybe_unused]] std::size_t usable_size(void* block) noexcept {
  Layout layout = g_layout.load(std::memory_order_relaxed);
  if (layout == Layout::unchecked) layout = check_layout();
  if (layout == Layout::header) {
    const std::size_t word = header_word(block);
    if ((word & kIsMmapped) == 0) return usable_from_header(word);
  }
  return malloc_usable_size(block);
}

}  // namespace

namespace {

[[gnu::always_inline]] inline void* take(std::size_t size) noexcept {
#if SLUICE_THREAD_CACHE
  if (size <= kLargestCachedBlock) {
    const std::size_t k = class_of(size);
    Lists& l = t_lists;
    if (FreeBlock* f = l.head[k]) {
      // The block after this one was freed long ago, by another exchange, and is cold by now: fetch
      // its line while this block is being used, so that the next pop (and its user's first writes)
      // does not wait for memory. A prefetch of null is a no-op.
      FreeBlock* next = f->next;
      __builtin_prefetch(next, 1, 3);
      l.head[k] = next;
      note_popped(l, k);
      l.bytes -= class_bytes(k);
      return f;
    }
    return std::malloc(class_bytes(k));
  }
#endif
  return std::malloc(size == 0 ? 1 : size);
}

[[gnu::noinline]] void* allocate_after_new_handler(std::size_t size) {
  for (;;) {
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
    if (void* p = take(size)) return p;
  }
}

}  // namespace

void* try_allocate(std::size_t size) noexcept { return take(size); }

void* allocate(std::size_t size) {
  if (void* p = take(size)) [[likely]]
    return p;
  return allocate_after_new_handler(size);
}

void deallocate(void* block, [[maybe_unused]] std::size_t size) noexcept {
  if (!block) return;
#if SLUICE_THREAD_CACHE
  if (size <= kLargestCachedBlock) {
    push(block, class_of(size));
    return;
  }
#endif
  std::free(block);
}

void deallocate(void* block) noexcept {
  if (!block) return;
#if SLUICE_THREAD_CACHE
  // The class whose size this block can hold: its usable size is at least what was asked.
  const std::size_t usable = usable_size(block);
  if (usable >= kGranule && usable / kGranule - 1 < kClasses) {
    push(block, usable / kGranule - 1);
    return;
  }
#endif
  std::free(block);
}

std::size_t cached_bytes() noexcept { return t_lists.bytes; }

std::size_t budget_bytes() noexcept { return SLUICE_THREAD_CACHE ? read_budget() : 0; }

void release_thread_cache() noexcept { drain(t_lists); }

}  // namespace sluice::memory
