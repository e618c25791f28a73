// Monotonic time in nanoseconds, for stats and rates; CPU time of the process (all its
// threads) and of the calling thread, user + system, for CPU budgets and per-CPU rates.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace dataecho {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t cpu_clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
inline int64_t process_cpu_ns() { return cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
inline int64_t thread_cpu_ns() { return cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

}  // namespace dataecho
