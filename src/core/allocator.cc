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
  // of trimming it, so that a tensor or batch freed is reused by the next one without
  // page faults. (The same as GLIBC_TUNABLES
  // glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=....)
  //
  // The number of arenas stays glibc's default (one per thread, up to 8 per core). It
  // was 1, so that a block freed by one thread is reused whichever thread allocates
  // next; but then every allocation of every pipeline thread takes the same lock, and
  // two threads decoding and augmenting images ran at 75-85% of their speed with one
  // arena per thread (image_bench, 2 threads). Reuse still happens: a block goes back
  // to the arena of the thread that allocated it, which allocates the next one.
  bool ok = mallopt(M_MMAP_MAX, 0) == 1;
  ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return ok;
#else
  return false;
#endif
}

}  // namespace dataecho
