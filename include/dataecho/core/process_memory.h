// The process's resident memory, from /proc/self (Linux): what the trainer reports as a
// run's peak RSS and what the memory-bound tests measure. Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>

namespace dataecho {

// A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:"); -1 where it is absent.
int64_t process_status_kib(const std::string& key);
// The process's proportional set size in KiB (its share of the pages it shares with
// other processes, from /proc/self/smaps_rollup): what sums correctly over a group of
// processes. -1 where the kernel does not give it.
int64_t process_pss_kib();
// Sets the peak RSS (VmHWM) back to the current RSS; false where the kernel cannot.
bool reset_peak_rss();

}  // namespace dataecho
