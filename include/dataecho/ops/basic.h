// Operators that reshape the stream without buffering across calls: take, skip,
// repeat, filter, shard. None owns threads; errors from the input pass through unchanged.
#pragma once

#include <functional>
#include <string>

#include "dataecho/core/dataset.h"

namespace dataecho {

// The first `count` elements. Buffers nothing.
DatasetPtr make_take(DatasetPtr input, int64_t count);

// All but the first `count` elements. Buffers nothing.
DatasetPtr make_skip(DatasetPtr input, int64_t count);

// The input `count` times (-1: forever), each pass a new epoch (a seeded shuffle below
// reshuffles). Ends if a pass yields nothing, instead of spinning. Buffers nothing.
DatasetPtr make_repeat(DatasetPtr input, int64_t count);

// The elements for which `predicate` is true. Buffers nothing.
using Predicate = std::function<bool(const Example&)>;
DatasetPtr make_filter(DatasetPtr input, std::string name, Predicate predicate);

// Every num_shards-th element starting at `index`: one worker's share in distributed
// training. Right after a multi-file source it shards whole files instead (every
// worker reads only its own files), as tf.data's FILE auto-shard policy. Buffers nothing.
DatasetPtr make_shard(DatasetPtr input, int64_t num_shards, int64_t index);

}  // namespace dataecho
