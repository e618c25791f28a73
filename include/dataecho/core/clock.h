// Monotonic time in nanoseconds, for stats and rates.
#pragma once

#include <chrono>
#include <cstdint>

namespace dataecho {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace dataecho
