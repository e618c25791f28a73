#include "dataecho/core/allocator.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

namespace dataecho {
namespace {

// Keeps the compiler from removing a malloc/memset/free sequence as dead code.
void escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A 64 MiB block, written, freed, allocated and written again: after the tuning the
// second write finds its pages in place. (glibc's default gives a large block its own
// mmap, so every such block faults in all 16,384 pages again: the trainer's steps were
// four times slower for it.)
TEST(Allocator, TuningKeepsLargeFreedBlocksMapped) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "not glibc";
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc's";
#else
  ASSERT_TRUE(tune_allocator_for_pipelines());
  constexpr size_t kBytes = 64 << 20;
  char* p = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, kBytes);
  escape(p);
  std::free(p);
  long before = minor_faults();
  char* q = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(q, nullptr);
  std::memset(q, 2, kBytes);
  escape(q);
  long faults = minor_faults() - before;
  std::free(q);
  EXPECT_LT(faults, 1000) << "pages of a freed 64 MiB block were faulted in again";
#endif
}

}  // namespace
}  // namespace dataecho
