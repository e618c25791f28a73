// Autotuning (issue 23, section 5): `"parallelism": "auto"` on map and interleave,
// `"buffer": "auto"` on prefetch and `"factor": "auto"` on echo (adaptive echo whose cap
// the tuner sets). Each such node owns a Knob (its setting, with the
// bounds it accepts); the pipeline's Tuner measures while the pipeline runs and moves
// the knobs.
//
// The tuner works in windows (1 s by default; a quarter of that during the warm-up). In
// each it measures the share of the time the consumer waits inside the pipeline's
// next(), the process's CPU time (cores in use) and, per tuned node, its elements/s, its
// workers' busy time and CPU time, and its bytes per element. Then, at most once per window during
// the warm-up (10 s) and at most once per `change_interval` (30 s) after it:
//   1. over a budget (CPU measured above it, or buffers projected above the RAM budget):
//      take back the last raise, or lower the knob that costs the most;
//   2. a trial pending (the last change raised a knob): keep it if that node's rate rose
//      by at least `min_gain` over the windows before it, else take it back and leave
//      that knob alone for four change intervals (it is tried again later: the load may
//      have changed). A take-back is a change and waits its turn like any other;
//   3. the consumer waits less than 5% of the time, and no tuned echo repeats 5% of its
//      rows or more: the pipeline keeps up, nothing moves;
//   4. otherwise raise the most likely bottleneck: a map whose workers are busy most of
//      the time (the highest busy share per thread) or a buffer whose consumer waits.
//      Parallelism goes up by one (doubling during the warm-up while the stage is busy),
//      a buffer doubles, each only where the projection stays within both budgets: a
//      stage's extra threads cost the CPU its threads use now (a stage that sleeps or
//      waits for the network costs little, so it may get more threads than there are
//      cores), and a buffer its elements' measured size;
//   5. nothing of 4 can rise (each at its limit, over a budget, idle for want of input or
//      taken back), none is waiting to be measured, and the consumer waits: raise a tuned
//      echo's cap to its max_factor. Adaptive echo then repeats recent elements only while
//      the next fresh one is late. The raise is judged like any other, on the echo's
//      output rate.
// With the CPU budget at all the cores (the default) the CPU can never go over it; there
// a raise is refused when the stage's CPU would need more cores than the machine has
// (half a core of slack), and otherwise the throughput test stops the raises.
//
// Tuning never changes what the pipeline produces: an ordered map emits in input order
// whatever its parallelism, and buffers do not reorder. Every change is published in the
// node's stats values ("parallelism", "buffer", "buffer_per_shard") and in report().
// Thread-safety: add() and report() from any thread; knobs' listeners run on the
// tuner's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/stats.h"

namespace dataecho {

// One tunable setting of one node. The node reads value() and listens for changes.
class Knob {
 public:
  enum class Kind { kParallelism, kBuffer, kEcho };
  // `buffered(value)`: the elements the node holds at most at that setting (for the RAM
  // budget); `max_bytes`: the bytes it holds at most whatever their size (a byte-bounded
  // buffer; 0: none); `param`: the name in the stats ("parallelism", "buffer", ...).
  Knob(Kind kind, std::string param, int64_t initial, int64_t min, int64_t max,
       std::function<int64_t(int64_t)> buffered, int64_t max_bytes = 0);

  Kind kind() const { return kind_; }
  const std::string& param() const { return param_; }
  int64_t value() const { return value_.load(std::memory_order_acquire); }
  int64_t min() const { return min_; }
  int64_t max() const { return max_; }
  int64_t buffered_elements(int64_t value) const { return buffered_(value); }
  int64_t max_buffered_bytes() const { return max_bytes_; }

  // Clamps to [min, max], stores and calls every listener with the new value.
  void set(int64_t value);

  // Calls `fn(value)` after each change until the returned handle is destroyed; once it
  // is, no call of `fn` is running or will run.
  using Handle = std::shared_ptr<void>;
  [[nodiscard]] Handle listen(std::function<void(int64_t)> fn);

 private:
  const Kind kind_;
  const std::string param_;
  const int64_t min_, max_;
  const std::function<int64_t(int64_t)> buffered_;
  const int64_t max_bytes_;
  std::atomic<int64_t> value_;
  std::mutex mu_;  // held while listeners run and while one is removed
  std::map<uint64_t, std::function<void(int64_t)>> listeners_;
  uint64_t next_id_ = 0;
};

struct TunerOptions {
  double cpu_budget = 0;                // cores; 0: $DATAECHO_CPU_BUDGET, else all cores
  int64_t ram_budget_bytes = 0;         // 0: $DATAECHO_RAM_BUDGET_MB, else 1/8 of physical memory
  double window_seconds = 1;            // one measurement
  double warmup_seconds = 10;           // a change per window until then
  double change_interval_seconds = 30;  // then at most one change per interval
  double min_gain = 0.05;               // a raise is kept when the rate rose this much
  int64_t max_parallelism = 64;
  // The budgets resolved from the environment and the machine where left at 0.
  TunerOptions resolved() const;
};

class Tuner {
 public:
  // `output`: the stats of the pipeline's last node (its rate and its consumer's wait).
  Tuner(TunerOptions options, std::shared_ptr<NodeStats> output);
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Tunes `knob` of the node `stats` (named by stats->name). Adding a knob again is a
  // no-op (a repeat makes a new iterator each pass; the knob, kept by the dataset,
  // keeps its value). The tuner's thread starts with the first knob.
  void add(const std::shared_ptr<Knob>& knob, const std::shared_ptr<NodeStats>& stats);
  // Stops the thread; knobs keep their values. Called by the pipeline before its
  // iterators go.
  void stop();

  // {"cpu_budget", "ram_budget_mb", "knobs": [{node, param, value, min, max}],
  //  "changes": [{"t_s", node, param, from, to, reason}], "windows": n}
  nlohmann::json report() const;

 private:
  struct Tuned;
  struct Window;
  void run();
  void decide(Window& w, double now_s, double consumer_wait, double cores);
  // The window length at `t_s` seconds since the start: a quarter of window_seconds during
  // the warm-up, so that the first raises come within a second.
  double window_at(double t_s) const {
    return t_s < o_.warmup_seconds ? o_.window_seconds / 4 : o_.window_seconds;
  }
  void change(Window& w, Tuned& k, int64_t to, double now_s, const std::string& reason);
  // The bytes all tuned nodes may buffer, with `changed` (if any) at `value`.
  double ram_projection(const std::vector<Tuned*>& knobs, const Tuned* changed,
                        int64_t value) const;

  const TunerOptions o_;
  const std::shared_ptr<NodeStats> output_;
  const int hardware_cores_;
  int64_t start_ns_ = 0;  // set when the thread starts (under mu_)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::unique_ptr<Tuned>> knobs_;
  std::thread thread_;
  // Written by the tuner thread under mu_.
  nlohmann::json changes_ = nlohmann::json::array();
  int64_t windows_ = 0;
};

}  // namespace dataecho
