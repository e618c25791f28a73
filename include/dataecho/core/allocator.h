// Allocator tuning for processes that run pipelines.
#pragma once

namespace dataecho {

// Keeps large freed blocks (decoded images, float batches of tens of MB) inside the
// process for reuse instead of unmapping them: with glibc's defaults every such buffer
// is a fresh mmap whose pages fault in again, which profiling showed costing more than
// the JPEG decode itself (docs/dataloader.md). Peak memory is unchanged: what is kept is
// what the pipeline's bounds already allowed at once. Call once, early, from a program's
// main(); the dataecho tool does. A library embedded elsewhere leaves the choice to the
// host program. Returns false where the C library offers no such control.
bool tune_allocator_for_pipelines();

}  // namespace dataecho
