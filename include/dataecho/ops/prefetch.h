// prefetch: one background thread that runs the input ahead of the consumer.
// Buffers at most `buffer` elements: the thread pulls from the input only when there
// is room, so a slow consumer blocks it. An error from the input is delivered in order,
// after the elements before it, and ends the stream. Destroying the iterator cancels
// and joins the thread, whether it is waiting for room or inside the input's next().
#pragma once

#include "dataecho/core/dataset.h"

namespace dataecho {

class Knob;

struct PrefetchOptions {
  int64_t buffer = 2;
  // "buffer": "auto": the pipeline's tuner sizes the buffer while it runs (core/tuner.h),
  // from `buffer` up to `max_buffer`, within its RAM budget.
  bool autotune = false;
  int64_t max_buffer = 4096;
  // For operators built on prefetch (interleave's shard readers): the buffer follows this
  // knob, which its owner hands to the tuner.
  std::shared_ptr<Knob> follow = nullptr;
};
DatasetPtr make_prefetch(DatasetPtr input, const PrefetchOptions& options);

}  // namespace dataecho
