// prefetch: one background thread that runs the input ahead of the consumer.
// Buffers at most `buffer` elements: the thread pulls from the input only when there
// is room, so a slow consumer blocks it. An error from the input is delivered in order,
// after the elements before it, and ends the stream. Destroying the iterator cancels
// and joins the thread, whether it is waiting for room or inside the input's next().
#pragma once

#include "dataecho/dataset.h"

namespace dataecho {

struct PrefetchOptions {
  int64_t buffer = 2;
};
DatasetPtr make_prefetch(DatasetPtr input, const PrefetchOptions& options);

}  // namespace dataecho
