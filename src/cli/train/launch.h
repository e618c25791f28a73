// `dataecho train --nproc N`: runs the same command line as N local ranks of one
// data-parallel job (docs/distributed.md), with torchrun's environment convention, and
// watches them: when one fails, the others get a bounded time to notice and exit.
#pragma once

namespace dataecho::cli {

// Set in the ranks that launch_local_ranks starts (they then ignore --nproc).
inline constexpr const char* kLaunchedRankVariable = "DATAECHO_NPROC_CHILD";

// Starts `nproc` copies of this process's command line (/proc/self/cmdline) with RANK,
// LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, and waits for
// them. Returns when all have exited; throws dataecho::Error naming the rank that failed
// first (and how), after killing any rank still running `grace_seconds` later.
void launch_local_ranks(int nproc, double timeout_seconds, double grace_seconds);

}  // namespace dataecho::cli
