// interleave: reads `cycle` shards (files) of a multi-shard source at once and takes
// one element from each in turn; when a shard ends, the next unopened shard takes its
// slot (tf.data's interleave with block length 1). The output order depends on the
// shard contents alone, never on thread timing.
// With parallelism > 1 each open shard is fetched by its own thread (a prefetch of
// `buffer_per_shard` elements), so slow reads overlap: buffers at most
// cycle * buffer_per_shard elements. An error in any shard ends the stream when the
// round-robin reaches that shard.
#pragma once

#include "dataecho/core/dataset.h"

namespace dataecho {

struct InterleaveOptions {
  int64_t cycle = 4;
  int64_t parallelism =
      -1;  // 0 or 1: read shards on the calling thread; otherwise one thread per open shard
  int64_t buffer_per_shard = 2;
  // "parallelism": "auto": one thread per open shard, and the pipeline's tuner sizes
  // buffer_per_shard while it runs (core/tuner.h). The cycle is not tuned: it sets the
  // output order, and tuning never changes what the pipeline produces.
  bool autotune = false;
};
// `input` must have shards() (a file source, a sharded range, or a file-level shard).
DatasetPtr make_interleave(DatasetPtr input, const InterleaveOptions& options);

}  // namespace dataecho
