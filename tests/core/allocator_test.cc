#include "dataecho/core/allocator.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "dataecho/core/tensor.h"

namespace dataecho {
namespace {

// Keeps the compiler from removing a malloc/memset/free sequence as dead code.
[[maybe_unused]] void escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Unused where the test below is skipped at compile time (sanitizers).
[[maybe_unused]] long minor_faults() {
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

// The VmFlags line of the mapping in /proc/self/smaps that holds `addr` ("" if none).
std::string vm_flags_at(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;  // a mapping's header line: "lo-hi perms offset dev inode path"
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// A buffer of a batch's size asks for transparent huge pages (its first touch then
// faults once per 2 MiB, not once per 4 KiB: dataloader_bench's first epoch with 2
// threads went from 78,000 page faults to 4,700). Small buffers do not.
TEST(Allocator, LargeBuffersAskForHugePages) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(thp, modes) || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "no transparent huge pages on this kernel";
  auto big = Buffer::allocate(size_t{16} << 20);
  const std::string flags = vm_flags_at(big->data() + (size_t{8} << 20));
  ASSERT_FALSE(flags.empty()) << "no mapping found for the buffer in /proc/self/smaps";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

}  // namespace
}  // namespace dataecho
