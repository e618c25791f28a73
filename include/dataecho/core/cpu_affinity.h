// Which CPUs the engine's own threads run on (Linux sched_setaffinity).
//
// By default the engine's threads run wherever the process may run. A program that wants
// its own work (a training step) not to share cores with the pipeline gives the engine a
// set of CPUs with set_engine_cpus() and pins its own thread to the others: every thread
// the engine starts after that (map workers, prefetch and interleave pullers, HTTP
// transfers, file readers, the tuner) pins itself to the set as it starts. Threads that
// are already running keep their CPUs, so set it before building the pipeline.
// `dataecho train --cpu-split` is the user of this (docs/train.md).
//
// Thread-safety: every function may be called from any thread; the set is read once by
// each new engine thread as it starts.
#pragma once

#include <thread>
#include <utility>
#include <vector>

namespace dataecho {

// The CPUs the calling thread may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// Pins the calling thread to `cpus` (all of them must be among the machine's); false when
// the kernel refuses, with the thread's CPUs unchanged. An empty set is refused.
bool pin_current_thread(const std::vector<int>& cpus);

// The engine's CPU set for threads started from now on; empty (the default): no pinning.
void set_engine_cpus(std::vector<int> cpus);
std::vector<int> engine_cpus();

// Pins the calling thread to the engine's set, if one is set (the first thing each engine
// thread does).
void pin_to_engine_cpus();

// std::thread running f() on the engine's CPUs: how the engine starts its threads.
template <class F>
std::thread start_engine_thread(F&& f) {
  return std::thread([f = std::forward<F>(f)]() mutable {
    pin_to_engine_cpus();
    f();
  });
}

// The split of `allowed` that `--cpu-split N` makes: the first N CPUs for the caller's own
// work, the rest for the engine. Needs 1 <= N < allowed.size(); throws
// dataecho::Error(kInvalidArgument) naming both numbers otherwise.
std::pair<std::vector<int>, std::vector<int>> split_cpus(const std::vector<int>& allowed, int n);

}  // namespace dataecho
