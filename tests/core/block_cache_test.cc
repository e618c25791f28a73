// The block cache behind large tensor buffers (src/core/block_cache.cc): reuse, the
// memory bound, and concurrent use.
#include "core/block_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "dataecho/core/tensor.h"

namespace dataecho {
namespace {

using detail::block_cache_stats;

// The cache's invariant: what it has mapped (handed out plus kept) never exceeds the
// most it ever handed out at once.
void expect_within_peak(const char* where) {
  const auto s = block_cache_stats();
  EXPECT_LE(s.live_bytes + s.cached_bytes, s.peak_live_bytes) << where;
}

TEST(BlockCache, AFreedBlockIsReusedWithoutANewMapping) {
  constexpr size_t kBytes = size_t{12} << 20;
  const std::byte* first = nullptr;
  {
    auto b = Buffer::allocate(kBytes);
    first = b->data();
    EXPECT_GE(b->footprint(), kBytes);
    EXPECT_EQ(b->footprint() % (size_t{2} << 20), 0u) << "whole huge pages";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (size_t{2} << 20), 0u);
  }
  const auto before = block_cache_stats();
  auto again = Buffer::allocate(kBytes);
  const auto after = block_cache_stats();
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(after.reuses, before.reuses + 1);
  EXPECT_EQ(after.maps, before.maps);
  expect_within_peak("after reuse");
}

TEST(BlockCache, SmallBuffersComeFromMalloc) {
  const auto before = block_cache_stats();
  auto b = Buffer::allocate(detail::kLargeBlockBytes / 2);
  const auto after = block_cache_stats();
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.maps + after.reuses, before.maps + before.reuses);
  EXPECT_EQ(b->footprint(), detail::kLargeBlockBytes / 2);
}

// A block much larger than any cached one cannot be served from the cache; the cached
// blocks it would push over the peak are unmapped first.
TEST(BlockCache, ANewPeakUnmapsCachedBlocksFirst) {
  { auto small = Buffer::allocate(size_t{9} << 20); }  // now cached
  const auto before = block_cache_stats();
  ASSERT_GT(before.cached_bytes, 0u);
  const size_t big = before.peak_live_bytes + (size_t{64} << 20);  // beyond any peak so far
  auto b = Buffer::allocate(big);
  const auto after = block_cache_stats();
  EXPECT_EQ(after.maps, before.maps + 1);
  EXPECT_GT(after.unmaps, before.unmaps);
  EXPECT_EQ(after.cached_bytes, 0u) << "all cached blocks together were below the new block";
  expect_within_peak("after a new peak");
}

// Writes a byte every MiB and at the end of a buffer: enough to tell two users of one
// block apart without writing all of it.
void mark(Buffer& b, unsigned char value) {
  for (size_t off = 0; off < b.size(); off += size_t{1} << 20)
    b.mutable_data()[off] = std::byte{value};
  b.mutable_data()[b.size() - 1] = std::byte{value};
}
bool marked(const Buffer& b, unsigned char value) {
  for (size_t off = 0; off < b.size(); off += size_t{1} << 20)
    if (b.data()[off] != std::byte{value}) return false;
  return b.data()[b.size() - 1] == std::byte{value};
}

// Random sizes held and dropped in random order: the bound holds throughout.
TEST(BlockCache, MappedBytesStayWithinThePeakForAnyMix) {
  std::mt19937 rng(11);
  std::vector<std::shared_ptr<Buffer>> held;
  for (int i = 0; i < 150; ++i) {
    if (held.size() < 4 && (held.empty() || rng() % 3 != 0)) {
      const size_t sizes[] = {size_t{8} << 20, size_t{9} << 20, size_t{12} << 20, size_t{20} << 20};
      held.push_back(Buffer::allocate(sizes[rng() % 4] + rng() % 4096));
      mark(*held.back(), 1);
    } else {
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(rng() % held.size()));
    }
    expect_within_peak("in the random mix");
  }
}

// A training loop's pattern, two batches of one size alive at a time: after the first
// two, every batch reuses a block.
TEST(BlockCache, ABatchLoopMapsEachBlockOnce) {
  const auto before = block_cache_stats();
  for (int i = 0; i < 20; ++i) {
    auto a = Buffer::allocate(size_t{10} << 20);
    auto b = Buffer::allocate(size_t{10} << 20);
    mark(*a, 1);
    mark(*b, 2);
  }
  const auto after = block_cache_stats();
  EXPECT_LE(after.maps - before.maps, 2);
  EXPECT_GE(after.reuses - before.reuses, 38);
}

// Threads taking and dropping blocks at once never share one: each writes its own
// pattern and finds it intact before letting go.
TEST(BlockCache, ConcurrentUsersNeverShareABlock) {
  const auto before = block_cache_stats();
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &corrupted] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 40; ++i) {
        auto b = Buffer::allocate((size_t{8} << 20) + rng() % (size_t{4} << 20));
        const auto value = static_cast<unsigned char>(t * 50 + i % 50);
        mark(*b, value);
        std::this_thread::yield();
        if (!marked(*b, value)) ++corrupted;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(block_cache_stats().live_bytes, before.live_bytes);
  expect_within_peak("after the threads");
}

}  // namespace
}  // namespace dataecho
