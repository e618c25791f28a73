// Allocator tuning for processes that run pipelines.
#pragma once

namespace dataecho {

// Keeps large blocks that malloc frees (decoder scratch, LibTorch's tensors in the
// trainer) inside the process for reuse instead of unmapping them: with glibc's defaults
// every such block is a fresh mmap whose pages fault in again, which profiling showed
// costing more than the JPEG decode itself (docs/dataloader.md). Peak memory is
// unchanged: what is kept is what was allocated at once before. Tensors' own buffers
// of 8 MiB or more (batches) come from dataecho's block cache, which keeps them for
// reuse whether or not this is called. Call once, early, from a program's
// main(); the dataecho tool does. A library embedded elsewhere leaves the choice to the
// host program. Returns false where the C library offers no such control.
bool tune_allocator_for_pipelines();

}  // namespace dataecho
