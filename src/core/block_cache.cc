#include "core/block_cache.h"

#include <sys/mman.h>

#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define DATAECHO_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define DATAECHO_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define DATAECHO_POISON(p, n) ((void)(p), (void)(n))
#define DATAECHO_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

// Why not malloc: glibc serves a block this large either from a fresh mmap, whose
// pages fault in again every time (a fault costs microseconds on a VM, and a batch of
// 128 ImageNet-sized float images is 18,800 pages), or, tuned to keep freed memory,
// from one arena shared by every thread so that a batch freed by the consumer is
// reused by the producer; that arena's lock then serialized every small allocation of
// parallel map workers (two threads decoding 28x28 PNGs ran at 40% of the speed of
// one). Here batches are mapped directly and kept when freed, and malloc keeps its
// per-thread arenas for everything else, smaller images included: those come in many
// sizes, which malloc's coalescing heap serves better than a cache of whole blocks.
//
// Blocks are mapped at a 2 MiB boundary and ask for transparent huge pages (where the
// kernel gives them on request: /sys/kernel/mm/transparent_hugepage/enabled = madvise,
// Debian's default), so that their first touch faults once per 2 MiB instead of once
// per 4 KiB: dataloader_bench's first epoch with 2 threads went from 78,000 faults and
// 0.82 s to 4,700 and 0.34 s.
//
// Memory bound: the blocks mapped (handed out plus cached) never exceed the most ever
// handed out at once. A request the cache cannot serve unmaps the least recently freed
// blocks until the new one fits under that peak, so the cache holds only what the
// pipeline's own bounds already needed at some moment.

namespace dataecho::detail {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

struct Cached {
  void* p;
  size_t size;
};

class BlockCache {
 public:
  void* acquire(size_t bytes, size_t* mapped) {
    const size_t size = round_up(bytes, kHuge);
    std::vector<Cached> evicted;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The smallest cached block that fits without wasting more than a quarter.
      size_t best = cached_.size();
      for (size_t i = 0; i < cached_.size(); ++i)
        if (cached_[i].size >= size && cached_[i].size - size <= size / 4 &&
            (best == cached_.size() || cached_[i].size < cached_[best].size))
          best = i;
      if (best < cached_.size()) {
        p = cached_[best].p;
        *mapped = cached_[best].size;
        s_.cached_bytes -= *mapped;
        cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(best));
        ++s_.reuses;
      } else {
        s_.peak_live_bytes = std::max(s_.peak_live_bytes, s_.live_bytes + size);
        // cached_ is in the order the blocks were freed: the oldest first.
        while (!cached_.empty() && s_.live_bytes + size + s_.cached_bytes > s_.peak_live_bytes) {
          s_.cached_bytes -= cached_.front().size;
          evicted.push_back(cached_.front());
          cached_.erase(cached_.begin());
        }
        *mapped = size;
      }
      s_.live_bytes += *mapped;
      s_.peak_live_bytes = std::max(s_.peak_live_bytes, s_.live_bytes);
    }
    for (const Cached& c : evicted) unmap(c.p, c.size);  // outside the lock
    if (p == nullptr) {
      p = map(size);
      if (p == nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        s_.live_bytes -= size;
        throw std::bad_alloc();
      }
    }
    DATAECHO_UNPOISON(p, *mapped);
    return p;
  }

  void release(void* p, size_t mapped) {
    DATAECHO_POISON(p, mapped);  // under ASan a use after free is reported
    std::lock_guard<std::mutex> lock(mu_);
    s_.live_bytes -= mapped;
    s_.cached_bytes += mapped;
    cached_.push_back(Cached{p, mapped});
  }

  BlockCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return s_;
  }

 private:
  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

  void* map(size_t size) {
    // Mapped with 2 MiB to spare, then trimmed to a block that starts at a boundary.
    void* raw =
        ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    auto* b = static_cast<std::byte*>(raw);
    const size_t head = (kHuge - reinterpret_cast<uintptr_t>(b) % kHuge) % kHuge;
    if (head > 0) ::munmap(b, head);
    if (kHuge - head > 0) ::munmap(b + head + size, kHuge - head);
    b += head;
#if defined(MADV_HUGEPAGE)
    (void)::madvise(b, size, MADV_HUGEPAGE);  // advice only
#endif
    std::lock_guard<std::mutex> lock(mu_);
    ++s_.maps;
    return b;
  }

  void unmap(void* p, size_t size) {
    DATAECHO_UNPOISON(p, size);
    ::munmap(p, size);
    std::lock_guard<std::mutex> lock(mu_);
    ++s_.unmaps;
  }

  std::mutex mu_;
  std::vector<Cached> cached_;  // freed blocks, in the order they were freed
  BlockCacheStats s_;           // the byte counts and counters, under mu_
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: buffers may outlive main()
  return *c;
}

}  // namespace

void* acquire_large_block(size_t bytes, size_t* mapped) { return cache().acquire(bytes, mapped); }
void release_large_block(void* p, size_t mapped) { cache().release(p, mapped); }
BlockCacheStats block_cache_stats() { return cache().stats(); }

}  // namespace dataecho::detail
