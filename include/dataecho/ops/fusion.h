// Map-and-batch fusion: the rewrite PipelineDef::build applies to a batch that reads
// straight from a map that keeps order (as tf.data's map_and_batch_fusion does). The
// fused node gives the same elements; the map's function writes its largest output
// straight into the batch's row instead of into a temporary that the batch copies. How
// it works, and why: src/ops/map_and_batch.h (private to the ops layer).
// Thread-safety: a plain function, used while a pipeline is built.
#pragma once

#include "dataecho/core/dataset.h"

namespace dataecho {

// `batch` (a node make_batch made) over a map that keeps order becomes a fused batch
// node over the same map; any other node comes back as it is.
DatasetPtr fuse_map_and_batch(const DatasetPtr& batch);

}  // namespace dataecho
