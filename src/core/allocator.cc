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
  // Serve every block from the heap (no per-block mmap), keep freed memory instead of
  // trimming it, and use one arena, so that a batch freed by one thread is reused by the
  // next batch whichever thread allocates it. (The same as GLIBC_TUNABLES
  // glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=...:glibc.malloc.arena_max=1.)
  //
  // One arena means one lock for every large allocation of every pipeline thread: two
  // threads decoding and augmenting images reach about 85% of the speed they have with
  // an arena each (image_bench, 2 threads). Per-thread arenas were tried and are much
  // worse for real pipelines: a thread's arena is a heap of at most 64 MB, so a batch
  // of 128 ImageNet-sized float images (77 MB) made by the batch thread is mmapped and
  // unmapped every time, and its pages faulted in again (dataloader_bench, 1 thread:
  // 600 images/s and 323k page faults, against 4,400 images/s and 60k faults).
  bool ok = mallopt(M_MMAP_MAX, 0) == 1;
  ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  ok &= mallopt(M_ARENA_MAX, 1) == 1;
  return ok;
#else
  return false;
#endif
}

}  // namespace dataecho
