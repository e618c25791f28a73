#include "dataecho/core/allocator.h"

// A C library header first: it is what defines __GLIBC__ (without one the check below
// was false and the tuning silently did nothing).
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>

#include <climits>
#endif

namespace dataecho {

bool tune_allocator_for_pipelines() {
#if defined(__GLIBC__)
  // Serve every block from the heap (no per-block mmap) and keep freed memory instead
  // of trimming it, so that memory freed is reused without its pages faulting in again.
  // (The same as GLIBC_TUNABLES glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=...)
  //
  // Tensor buffers of 8 MiB or more (batches) do not come from malloc at all but from
  // the block cache (src/core/block_cache.cc), so each thread keeps its own arena. An
  // earlier version also set one arena for the whole process, so that batches freed by
  // one thread were reused by another; that arena's lock then serialized every small
  // allocation of parallel map workers (two threads decoding 28x28 PNGs ran at 40% of
  // one thread).
  bool ok = mallopt(M_MMAP_MAX, 0) == 1;
  ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return ok;
#else
  return false;
#endif
}

}  // namespace dataecho
