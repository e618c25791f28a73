// A pipeline's peak memory stays within what its buffers declare plus a small constant
// (README, "Sources and operators"): measured as the growth of the process's peak RSS.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "dataecho/core/process_memory.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

// The peak RSS while `spec` runs to its end, in KiB above `base_kib`. After the first
// batch the consumer pauses, as a long training step would, long enough for every
// buffer to fill (the pipeline makes a batch in about 10 ms), then takes the rest.
// Both helpers are unused where the test is skipped at compile time (sanitizers).
[[maybe_unused]] int64_t peak_above_kib(const std::string& spec, int64_t base_kib,
                                        int64_t* batches) {
  auto p = build(spec);
  EXPECT_TRUE(reset_peak_rss());
  *batches = 0;
  while (auto e = p->next()) {
    if (++*batches == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  return process_status_kib("VmHWM:") - base_kib;
}

[[maybe_unused]] std::string spec(int prefetch) {
  // 4 MiB elements (a million floats), map capacity 2 + 2, batches of 4 (16 MiB, from
  // the block cache), `prefetch` batches ahead.
  return R"({"seed": 1, "source": {"kind": "range", "count": 64}, "stages": [
      {"op": "map", "fn": "random_noise", "args": {"size": 1048576}, "parallelism": 2,
       "buffer": 2},
      {"op": "batch", "size": 4},
      {"op": "prefetch", "buffer": )" +
         std::to_string(prefetch) + "}]}";
}

TEST(MemoryBound, BatchPipelinePeakIsWhatItsBuffersDeclare) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers keep freed memory (quarantine, shadow)";
#else
  if (process_status_kib("VmHWM:") < 0 || !reset_peak_rss())
    GTEST_SKIP() << "no /proc/self peak RSS";
  constexpr int64_t kBatchKib = 16 * 1024;
  const int64_t base = process_status_kib("VmRSS:");
  // Declared: the prefetch's batches, the one the consumer holds, the one being filled
  // and the next, which the map's 4 elements in flight may already be written into
  // (map-and-batch fusion). Before the batch chose the column to place, up to 4
  // elements (one batch's worth) were made outside it.
  auto declared = [&](int prefetch) { return (prefetch + 3) * kBatchKib + kBatchKib; };
  int64_t batches = 0;
  const int64_t two = peak_above_kib(spec(2), base, &batches);
  EXPECT_EQ(batches, 16);
  EXPECT_LE(two, declared(2) + 8 * 1024) << "KiB above the RSS before";
  // It is the buffers that count: 8 more prefetched batches take about 8 more. (Blocks
  // the first run freed are reused, hence the same base.)
  const int64_t ten = peak_above_kib(spec(10), base, &batches);
  EXPECT_LE(ten, declared(10) + 8 * 1024) << "KiB above the RSS before";
  EXPECT_GE(ten, two + 6 * kBatchKib) << "prefetch 10 against prefetch 2";
#endif
}

}  // namespace
}  // namespace dataecho::testing
