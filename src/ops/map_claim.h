// How many input elements a parallel map's worker takes at once (src/ops/map.cc), as a
// function of what the map measured, so that a test can check it on made-up costs.
// Internal to src/ops.
#pragma once

#include <algorithm>
#include <cstddef>

namespace dataecho {

// The work a take is sized for: taking elements one by one costs a lock per take and per
// result filed, and often a thread wake-up (microseconds on a VM).
inline constexpr double kMapClaimNs = 100e3;

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

}  // namespace dataecho
