// The per-thread free lists in front of malloc (common/thread_cache.h). Built with a sanitizer the cache
// is compiled out (every call is malloc/free), and these tests are not built (tests/unit/common/CMakeLists.txt).
#include "common/thread_cache.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace sluice::memory {
namespace {

class ThreadCache : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(budget_bytes(), 0u) << "the cache is compiled out, yet its tests were built";
    release_thread_cache();
  }
  void TearDown() override { release_thread_cache(); }
};

TEST_F(ThreadCache, AFreedBlockIsHandedBackForItsSizeClassAndNotForAnother) {
  void* a = allocate(100);
  std::memset(a, 0xab, 100);
  deallocate(a, 100);
  EXPECT_EQ(cached_bytes(), 112u);  // 100 rounds up to its 16-byte class
  void* other = allocate(500);
  EXPECT_NE(other, a) << "a 500-byte request must not get a 112-byte block";
  deallocate(other, 500);
  void* b = allocate(97);  // same class as 100
  EXPECT_EQ(b, a);
  EXPECT_EQ(cached_bytes(), 512u) << "only the 500-byte block is left";
  deallocate(b);  // unsized: the class comes from malloc's usable size
  void* c = allocate(112);
  EXPECT_EQ(c, a);
  deallocate(c, 112);
}

TEST_F(ThreadCache, ABlockGrownByReallocIsKeptInAClassItCanHold) {
  void* p = std::realloc(allocate(40), 700);
  ASSERT_NE(p, nullptr);
  deallocate(p);
  EXPECT_GE(cached_bytes(), 700u);
  void* again = allocate(700);
  EXPECT_EQ(again, p);
  deallocate(again, 700);
}

TEST_F(ThreadCache, AnUnsizedFreeFilesEveryBlockUnderTheClassItsUsableSizeCanHold) {
  // Unsized frees read the block's size from malloc's chunk header; this checks that against
  // malloc_usable_size() for every size the lists hold, blocks from malloc itself included.
  for (std::size_t size = 1; size <= kLargestCachedBlock; ++size) {
    void* block = std::malloc(size);
    ASSERT_NE(block, nullptr);
    const std::size_t usable = malloc_usable_size(block);
    const std::size_t before = cached_bytes();
    deallocate(block);
    const std::size_t expected = usable / 16 * 16 <= kLargestCachedBlock ? usable / 16 * 16 : 0;
    ASSERT_EQ(cached_bytes() - before, expected) << "size " << size << ", usable " << usable;
    release_thread_cache();
  }
}

TEST_F(ThreadCache, LargeBlocksGoStraightToMalloc) {
  void* big = allocate(kLargestCachedBlock + 1);
  deallocate(big, kLargestCachedBlock + 1);
  EXPECT_EQ(cached_bytes(), 0u);
}

TEST_F(ThreadCache, AFullBudgetGivesBackOtherSizesSoTheNewestFreeIsKept) {
  const std::size_t n = budget_bytes() / kLargestCachedBlock + 8;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < n; ++i) blocks.push_back(allocate(kLargestCachedBlock));
  for (void* b : blocks) deallocate(b, kLargestCachedBlock);
  EXPECT_LE(cached_bytes(), budget_bytes());
  EXPECT_GT(cached_bytes(), budget_bytes() - kLargestCachedBlock);
  void* small = allocate(24);  // a miss: malloc
  deallocate(small, 24);
  EXPECT_LE(cached_bytes(), budget_bytes());
  void* again = allocate(24);
  EXPECT_EQ(again, small) << "the small block was dropped instead of a cached large one";
  deallocate(again, 24);
}

TEST_F(ThreadCache, EachThreadHasItsOwnListsAndABlockFreedThereStaysThere) {
  void* a = allocate(64);
  std::size_t cached_there = 0;
  void* reused_there = nullptr;
  std::thread t([&] {
    deallocate(a, 64);  // allocated on the test's thread, freed here
    cached_there = cached_bytes();
    reused_there = allocate(64);
    deallocate(reused_there, 64);
  });
  t.join();  // the thread's end hands its lists back to malloc
  EXPECT_EQ(cached_there, 64u);
  EXPECT_EQ(reused_there, a);
  EXPECT_EQ(cached_bytes(), 0u) << "the other thread's free must not reach this thread's lists";
}

TEST(ThreadCacheAnyBuild, BlocksAreUsableAndZeroBytesIsAValidRequest) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{17}, kLargestCachedBlock,
                           kLargestCachedBlock * 4}) {
    auto* p = static_cast<unsigned char*>(allocate(size));
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, size);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << size;
    deallocate(p, size);
  }
}

}  // namespace
}  // namespace sluice::memory
