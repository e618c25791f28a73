// How many input elements a parallel map's worker takes at once, how large its default
// buffer grows and how long its consumer waits (src/ops/map.cc), as functions of what
// the map measured, so that a test can check them on made-up costs.
// Internal to src/ops.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace dataecho {

// The work a take is sized for: taking elements one by one costs a lock per take and per
// result filed, and often a thread wake-up (microseconds on a VM).
inline constexpr double kMapClaimNs = 100e3;

// How long a parallel map's consumer waits for a wake-up before it looks for results
// itself. Workers wake it once half the buffer is done (or at the end), so a result
// filed short of that, with every worker then in a slow element, would otherwise wait
// for the slow elements; this bounds that wait. At one look per 5 ms, a consumer blocked
// for long costs about 0.1% of a core.
inline constexpr std::chrono::milliseconds kMapLookAgain{5};

// One element, unless the function is so cheap (`mean_apply_ns` per element, measured;
// 0: not yet) that taking elements one by one would cost more than the function. Then
// enough for about kMapClaimNs of work, at most an even share of half the `capacity`
// among the `active` workers, and no more than the room left (`in_flight` elements taken
// and not yet emitted).
inline size_t map_claim_size(double mean_apply_ns, size_t capacity, size_t active,
                             size_t in_flight) {
  if (mean_apply_ns <= 0) return 1;
  const size_t most = std::max<size_t>(1, capacity / (2 * std::max<size_t>(1, active)));
  const auto wanted = static_cast<size_t>(kMapClaimNs / mean_apply_ns);
  const size_t room = capacity > in_flight ? capacity - in_flight : 0;
  return std::max<size_t>(1, std::min({wanted, most, room}));
}

// The default buffer (MapOptions::buffer 0) for a function that costs `mean_apply_ns` per
// element and makes elements of `mean_bytes` (both measured; 0: not yet): normally
// max(16, parallelism), the caller's part; for cheap elements, enough that the consumer,
// woken once half the buffer is ready, takes about 2 x kMapClaimNs of work per wake-up
// (text lines through tokenize: a few hundred), but never more than kCheapBufferMost
// elements or kCheapBufferBytes of them. 0 where the function is not cheap.
inline constexpr size_t kCheapBufferMost = 1024;
inline constexpr double kCheapBufferBytes = 1 << 20;
inline size_t map_cheap_buffer(double mean_apply_ns, double mean_bytes) {
  if (mean_apply_ns <= 0) return 0;
  const double by_work = 4 * kMapClaimNs / mean_apply_ns;
  const double by_bytes = kCheapBufferBytes / std::max(1.0, mean_bytes);
  return static_cast<size_t>(std::min({by_work, by_bytes, static_cast<double>(kCheapBufferMost)}));
}

}  // namespace dataecho
