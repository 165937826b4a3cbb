// The sluice binary's global operator new and delete: the per-thread free lists of common/thread_cache.h.
// Only the binary replaces them (libraries and tests keep the standard ones), and only when no sanitizer
// is built in (app/CMakeLists.txt), so ASan keeps checking every new/delete pair. libstdc++'s other
// forms (nothrow, arrays) call these three; the aligned forms keep their own aligned_alloc and free.
#include <cstddef>
#include <new>

#include "common/thread_cache.h"

void* operator new(std::size_t size) { return sluice::memory::allocate(size); }

void operator delete(void* block) noexcept { sluice::memory::deallocate(block); }

void operator delete(void* block, std::size_t size) noexcept { sluice::memory::deallocate(block, size); }
