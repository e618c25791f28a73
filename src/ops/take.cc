#include "dataecho/ops/basic.h"
#include "position_filter.h"

namespace dataecho {

// The first `count` elements; the input is not read past them. Saved: elements taken.
DatasetPtr make_take(DatasetPtr input, int64_t count) {
  if (count < 0)
    throw_error(ErrorCode::kInvalidArgument, "take",
                "count must be >= 0, got " + std::to_string(count));
  PositionRule rule;
  rule.op = "take";
  rule.verdict = [count](int64_t p) {
    return p < count ? PositionVerdict::kPass : PositionVerdict::kEnd;
  };
  rule.at_end = [count](int64_t) { return count; };  // an input that ended stays ended
  return make_position_filter(std::move(input), std::move(rule));
}

}  // namespace dataecho
