// The one helper behind take, skip and shard: a node that passes, drops or ends at each
// input element by its position in the input (0, 1, 2, ... since the start or since
// the position restored). Its state is that position, saved as each op has always
// saved it (take: elements taken; skip: elements left to skip; shard: position), so
// states saved before the helper existed still restore.
#pragma once

#include <functional>
#include <string>

#include "dataecho/core/dataset.h"

namespace dataecho {

enum class PositionVerdict { kPass, kDrop, kEnd };

struct PositionRule {
  std::string op;  // the node's name and its state's tag
  std::function<PositionVerdict(int64_t position)> verdict;
  // The position to keep once the input has ended (default: where it ended).
  std::function<int64_t(int64_t position)> at_end;
  // The saved value of a position, and the position of a saved value (default: itself).
  std::function<int64_t(int64_t position)> to_saved;
  std::function<int64_t(int64_t saved)> from_saved;
};

DatasetPtr make_position_filter(DatasetPtr input, PositionRule rule);

}  // namespace dataecho
