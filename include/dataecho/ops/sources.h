// In-process sources: `range` (integers, for tests and benchmarks) and `memory`
// (examples held by the caller). Neither buffers: next() produces the element on demand.
#pragma once

#include <vector>

#include "dataecho/core/dataset.h"

namespace dataecho {

struct RangeOptions {
  int64_t count = 0;  // yields ids 0..count-1, each with an int64 scalar field "value" == id
  // Splits the range into this many contiguous shards (for `interleave` and `shard`).
  int64_t shards = 1;
};
DatasetPtr make_range(const RangeOptions& options);

// Yields `examples` in order; an example's id is its index unless `keep_ids`.
DatasetPtr make_memory_source(std::vector<Example> examples, bool keep_ids = false);

// Reads `parts` one after another; its shards() are `parts`. How multi-file sources
// read their files when no `interleave` follows them. Buffers nothing.
DatasetPtr make_concatenate(std::vector<DatasetPtr> parts);

// A source over several shards (files, or ranges of a `range`): reads them one after
// another, and hands them to `interleave` and file-level `shard` through shards(). The
// shards share the source's label and stats and count its elements, whichever way they
// are read. Buffers nothing.
DatasetPtr make_sharded_source(std::string op_name, std::vector<std::shared_ptr<Dataset>> shards);

}  // namespace dataecho
