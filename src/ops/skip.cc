#include <algorithm>

#include "dataecho/ops/basic.h"
#include "position_filter.h"

namespace dataecho {

// Every element after the first `count`. Saved: elements left to skip.
DatasetPtr make_skip(DatasetPtr input, int64_t count) {
  if (count < 0)
    throw_error(ErrorCode::kInvalidArgument, "skip",
                "count must be >= 0, got " + std::to_string(count));
  PositionRule rule;
  rule.op = "skip";
  rule.verdict = [count](int64_t p) {
    return p < count ? PositionVerdict::kDrop : PositionVerdict::kPass;
  };
  rule.at_end = [count](int64_t p) { return std::max(p, count); };  // nothing left to skip
  rule.to_saved = [count](int64_t p) { return std::max<int64_t>(count - p, 0); };
  rule.from_saved = [count](int64_t left) { return count - left; };
  return make_position_filter(std::move(input), std::move(rule));
}

}  // namespace dataecho
