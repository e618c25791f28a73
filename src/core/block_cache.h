// Memory for large tensors: blocks mapped from the kernel and kept for reuse.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dataecho::detail {

// Buffers of at least this many bytes (batches of images) come from the block cache,
// smaller ones from malloc.
inline constexpr size_t kLargeBlockBytes = size_t{8} << 20;

// A block of at least `bytes`, aligned to 2 MiB; `*mapped` receives its real size, to
// be passed back to release_large_block. Throws std::bad_alloc.
void* acquire_large_block(size_t bytes, size_t* mapped);
void release_large_block(void* p, size_t mapped);

struct BlockCacheStats {
  size_t live_bytes = 0;       // in blocks handed out
  size_t cached_bytes = 0;     // in freed blocks kept for reuse
  size_t peak_live_bytes = 0;  // the most ever handed out at once
  int64_t maps = 0;            // blocks mapped from the kernel
  int64_t unmaps = 0;          // blocks given back to it
  int64_t reuses = 0;          // requests served from the cache
};
BlockCacheStats block_cache_stats();

}  // namespace dataecho::detail
