#include "common/thread_cache.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#ifndef SLUICE_THREAD_CACHE
#define SLUICE_THREAD_CACHE 1
#endif

namespace sluice::memory {
namespace {

constexpr std::size_t kGranule = 16;  // glibc's alignment: every malloc block is a multiple of it
constexpr std::size_t kClasses = kLargestCachedBlock / kGranule;
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

// Full: the next block, round-robin, of another size goes back to malloc, so the lists of sizes no
// longer asked for (a burst's, or blocks nghttp2 grew with realloc) drain instead of holding the budget.
bool evict_one(Lists& l, std::size_t keep) noexcept {
  for (std::size_t i = 0; i < kClasses; ++i) {
    const std::size_t v = (l.victim + i) % kClasses;
    if (v == keep || !l.head[v]) continue;
    FreeBlock* f = l.head[v];
    l.head[v] = f->next;
    l.bytes -= class_bytes(v);
    l.victim = (v + 1) % kClasses;
    std::free(f);
    return true;
  }
  return false;
}

[[maybe_unused]] void push(void* block, std::size_t k) noexcept {
  Lists& l = t_lists;
  if (l.state != Lists::open && !open_lists(l)) {
    std::free(block);
    return;
  }
  const std::size_t bytes = class_bytes(k);
  while (l.bytes + bytes > l.budget) {
    if (!evict_one(l, k)) {
      std::free(block);
      return;
    }
  }
  auto* f = static_cast<FreeBlock*>(block);
  f->next = l.head[k];
  l.head[k] = f;
  l.bytes += bytes;
}

}  // namespace

void* try_allocate(std::size_t size) noexcept {
#if SLUICE_THREAD_CACHE
  if (size <= kLargestCachedBlock) {
    const std::size_t k = class_of(size);
    Lists& l = t_lists;
    if (FreeBlock* f = l.head[k]) {
      l.head[k] = f->next;
      l.bytes -= class_bytes(k);
      return f;
    }
    return std::malloc(class_bytes(k));
  }
#endif
  return std::malloc(size == 0 ? 1 : size);
}

void* allocate(std::size_t size) {
  for (;;) {
    if (void* p = try_allocate(size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
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
  // The class whose size this block can hold: glibc's usable size is at least what was asked.
  const std::size_t usable = malloc_usable_size(block);
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
