// Autotuning: `"parallelism": "auto"` on map and interleave,
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
// What the tuner learned outlasts its pipeline (core/tuner_memory.h): a tuner with
// TunerOptions::memory_key starts from the memo stored under it (the knobs' values, its
// time past the warm-up, its blocks and a raise on trial) and stores its own there after
// each window and when it stops; the pipeline's saved state carries the memo too.
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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/clock.h"
#include "dataecho/core/stats.h"
#include "dataecho/core/tuner_memory.h"

namespace dataecho {

class ScalePolicy;  // core/autoscale.h
struct ScaleStep;

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
  // Null: the real clocks, and a thread of the tuner's own that measures a window at a
  // time. Given (a ManualClock in tests), the tuner starts no thread: its owner moves the
  // clock and calls Tuner::step() (Pipeline::tune_step()) at the end of each window.
  std::shared_ptr<const Clock> clock;
  // Remembering (core/tuner_memory.h). With `memory_key` set (PipelineDef::build() sets it
  // to the definition's tuner_memory_key()) and `remember` true, the tuner starts from the
  // memo stored under the key in `memory` (null: TunerMemory::global()) and stores its own
  // there. With `remember` false it starts from the spec's values and stores nothing, and a
  // restored state's memo is ignored too ("autotune": {"remember": false}).
  std::string memory_key;
  bool remember = true;
  std::shared_ptr<TunerMemory> memory;
  // The budgets resolved from the environment and the machine where left at 0.
  TunerOptions resolved() const;
};

// What the tuner measured of one tuned node over one window: the inputs of its rules.
struct KnobWindow {
  double busy_share = 0;         // its workers' busy time / (window * threads)
  double cpu_per_thread = 0;     // the cores one of its threads used
  double wait_share = 0;         // its consumer's time inside its next() / window
  double repeat_share = 0;       // an echo: the share of the window's rows that were repeats
  int64_t elements = 0;          // the node's elements so far (a running count, not per window)
  double bytes_per_element = 0;  // measured so far, for the RAM budget
};

// One window's measurements.
struct TunerWindow {
  double t_s = 0;            // its end, in seconds since the tuner started
  double consumer_wait = 0;  // the share of the window the pipeline's consumer waited in next()
  double cores = 0;          // the process's CPU time over the window / its length
  std::vector<KnobWindow> knobs;  // one per knob, in the order they were added
};

// A change of one knob, and the rule that made it.
struct TunerChange {
  enum class Rule {
    kCpuBudget,  // 1: over the CPU budget
    kRamBudget,  // 1: over the RAM budget
    kTakeBack,   // 2: a raise without gain, taken back
    kRaise,      // 4: the most likely bottleneck raised
    kRaiseEcho,  // 5: an echo's cap raised
  };
  size_t knob = 0;  // its index, in the order added
  int64_t from = 0, to = 0;
  Rule rule = Rule::kRaise;
  std::string reason;  // as in report()'s "changes"
};

// The tuner's decisions without its thread, clock or counters: fed one TunerWindow at a
// time (by the Tuner from its nodes' counters, or by a test with made-up measurements), it
// moves its knobs by the five rules above. Each rule is a const function of a window and
// of the state (the last change and when, the trial pending, the knobs taken back);
// step() applies them in order and changes at most one knob per window.
// Not thread-safe: one caller at a time (the Tuner's thread).
class TunerPolicy {
 public:
  // `options`: resolved (budgets set); `hardware_cores`: the machine's.
  TunerPolicy(const TunerOptions& options, int hardware_cores);

  // Tunes `knob`, whose node had produced `elements` by `t_s` (its rate is measured from
  // there). Returns its index.
  size_t add(std::shared_ptr<Knob> knob, int64_t elements, double t_s);
  size_t size() const { return knobs_.size(); }
  Knob& knob(size_t i) const { return *knobs_.at(i).knob; }

  struct Outcome {
    std::optional<TunerChange> change;  // applied: the knob is set
    std::optional<size_t> kept;         // rule 2 kept the raise of this knob
  };
  // One window (`w.knobs` has one entry per knob): the rules in order; the first that
  // changes a knob sets it (Knob::set, whose listeners run on this thread).
  Outcome step(const TunerWindow& w);

  // The rules, on `w` and the state as it is, changing nothing; step() calls them.
  // The change interval: may a knob change in a window that ends at `t_s`? (During the
  // warm-up, in the next window, woken a little early or late; after it, a full
  // change interval after the last change.)
  bool may_change(double t_s) const;
  // 1. Over a budget: the change that lowers a knob (the trial's back to where it was, else
  // the costliest map by one for the CPU, the first buffer by half for the RAM), if any.
  std::optional<TunerChange> over_budget(const TunerWindow& w) const;
  // 2. The trial pending, judged on `w`. kTakeBack fills `*take_back`.
  enum class Verdict { kNone, kWait, kKeep, kTakeBack };
  Verdict judge_trial(const TunerWindow& w, TunerChange* take_back) const;
  // 3. The pipeline keeps up: its consumer waits, and tuned echoes repeat, under 5%.
  bool keeps_up(const TunerWindow& w) const;
  // 4. The busiest map (busy half the time or more), else the buffer waited on most, that
  // may rise within the limits and budgets.
  std::optional<TunerChange> raise_bottleneck(const TunerWindow& w) const;
  // 5. With none of 4 to raise, none waiting to be measured and the consumer waiting: an
  // echo's cap, to its max.
  std::optional<TunerChange> raise_echo(const TunerWindow& w) const;

  // The window length at `t_s` seconds since the start: a quarter of window_seconds during
  // the warm-up, so that the first raises come within a second.
  double window_at(double t_s) const {
    return t_s < o_.warmup_seconds ? o_.window_seconds / 4 : o_.window_seconds;
  }
  const TunerOptions& options() const { return o_; }
  // The state, for tests: the knob whose raise is being judged, and until when a knob
  // whose raise was taken back is left alone (s; -1: not).
  std::optional<size_t> trial() const { return trial_; }
  double blocked_until(size_t i) const { return knobs_.at(i).blocked_until; }
  // Knob `i` is set by another (a service source's ScalePolicy sets the echo's cap): the
  // rules never raise it.
  void hold(size_t i) { knobs_.at(i).held = true; }

  // Remembering (TunerMemo). Knob `i`'s state: its value, block and a trial pending (node
  // and param left empty, for the caller to fill). resume(): knob `i` goes on from `k`'s
  // block and trial (its value is the caller's to set). The last change: none before any.
  TunerMemo::Knob remember(size_t i) const;
  void resume(size_t i, const TunerMemo::Knob& k);
  std::optional<double> last_change() const;
  void resume_last_change(std::optional<double> t_s);

 private:
  struct State {
    std::shared_ptr<Knob> knob;
    double blocked_until = -1;
    // The node's elements at the last change (of any knob) and when that was: a raise
    // is judged on this node's rate. (The pipeline's output may be batches of 128: too
    // few in a window to measure a 5% gain; a map's elements are single examples.)
    int64_t elements_at_change = 0;
    double change_s = 0;
    bool held = false;  // hold()
  };
  int64_t since_change(const TunerWindow& w, size_t i) const {
    return w.knobs[i].elements - knobs_[i].elements_at_change;
  }
  double rate_since_change(const TunerWindow& w, size_t i) const;
  bool warm_up(double t_s) const { return t_s < o_.warmup_seconds; }
  double interval_at(double t_s) const {
    return warm_up(t_s) ? window_at(t_s) : o_.change_interval_seconds;
  }
  bool cpu_limited() const { return o_.cpu_budget < hardware_cores_ - 0.01; }
  std::string budget_label(double cores) const;
  // The share of the time the pipeline falls short: its consumer waits, or an echo fills
  // in with repeats.
  double short_share(const TunerWindow& w) const;
  // The bytes all knobs' nodes may buffer, with knob `changed` (if any) at `value`.
  double ram_projection(const TunerWindow& w, std::optional<size_t> changed, int64_t value) const;
  // Pass 0 (maps), 1 (buffers) or 2 (echoes) of the search for a knob to raise.
  std::optional<TunerChange> raise_pass(const TunerWindow& w, int pass) const;
  // Sets the knob and records the change (its `to` becomes the value the knob took).
  void apply(const TunerWindow& w, TunerChange& c);

  const TunerOptions o_;
  const int hardware_cores_;
  std::vector<State> knobs_;
  double last_change_s_ = -1e300;
  std::optional<size_t> trial_;  // a raise not yet judged
  int64_t trial_from_ = 0;
  double rate_before_ = 0;  // the trial node's elements/s before the raise
};

class Tuner {
 public:
  // `output`: the stats of the pipeline's last node (its rate and its consumer's wait).
  // With `options.clock` set, no thread: see TunerOptions::clock and step().
  Tuner(TunerOptions options, std::shared_ptr<NodeStats> output);
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Tunes `knob` of the node `stats` (named by stats->name). Adding a knob again is a
  // no-op (a repeat makes a new iterator each pass; the knob, kept by the dataset,
  // keeps its value). The tuner's thread starts with the first knob.
  void add(const std::shared_ptr<Knob>& knob, const std::shared_ptr<NodeStats>& stats);
  // The data service's decision loop (core/autoscale.h) of the service source whose
  // stats are `source`: after each window's rules the tuner feeds `scaler` the window,
  // sets the tuned echo's cap to what it returns (with a policy that sets_echo(), the
  // rules leave that cap alone), publishes its values in the source's stats and reports
  // its decisions (report()'s "changes" and "scale"). Adding it again is a no-op; one
  // per tuner (a second is ignored). Starts the tuner's thread as add() does.
  void add_scaler(const std::shared_ptr<ScalePolicy>& scaler,
                  const std::shared_ptr<NodeStats>& source);
  // Stops the thread; knobs keep their values. Called by the pipeline before its
  // iterators go.
  void stop();

  // With TunerOptions::clock set: one window, from the last step (or the first add()) to the
  // clock's now: measures the counters and applies the rules. Returns the change made.
  std::optional<TunerChange> step();

  // What it learned (TunerMemo), the knobs at their values now; nullopt before the first
  // knob. Also the remembered knobs of nodes this pipeline has not (yet) added.
  std::optional<TunerMemo> memo() const;
  // Goes on from `memo` (a restored state's): the knobs added so far take its values now,
  // those added later when they come, and the tuner's time and rules go on from its.
  // Ignored with TunerOptions::remember false.
  void resume(const TunerMemo& memo);

  // {"cpu_budget", "ram_budget_mb", "knobs": [{node, param, value, min, max}],
  //  "changes": [{"t_s", node, param, from, to, reason}], "windows": n (this tuner's),
  //  "remember": bool, "resumed": bool, "resumed_from": "memory" | "state" | null,
  //  "elapsed_s": its time (s since its first knob, plus the time of a memo resumed),
  //  "scale": the ScalePolicy's report() (only with one)}
  nlohmann::json report() const;

 private:
  struct Tuned;
  void run();
  std::unique_ptr<Tuned> make_tuned(const std::shared_ptr<Knob>& knob,
                                    const std::shared_ptr<NodeStats>& stats) const;
  // Knobs that joined since the last window join the policy (and resume from their memo
  // knob, with the pending last change). Under mu_.
  void join_policy();
  // Under mu_.
  TunerMemo memo_locked(int64_t now_ns) const;
  void store_locked(int64_t now_ns);
  // Measures the window that ends at `t` (ns) and decides. Called with mu_ held (by
  // `lock`); releases it while knobs change.
  std::optional<TunerChange> window(std::unique_lock<std::mutex>& lock, int64_t t);
  void begin();  // the measurements' base, at the start (under mu_)
  // Starts the tuner's time (and its thread, if it has one) with the first knob or scaler.
  // Under mu_.
  void start_locked();
  // The scaler's step on window `w` of `dt` s (outside mu_): sets the echo's cap, the
  // source's stats values; returns the step.
  ScaleStep scale_window(ScalePolicy& scaler, NodeStats& source, const TunerWindow& w,
                         const std::vector<Tuned*>& knobs, double dt);
  // Its step's changes in changes_ (under mu_).
  void record_scale(const ScaleStep& s, double t_s, const std::vector<Tuned*>& knobs);
  // The first echo knob among `knobs`, if any.
  static Tuned* echo_of(const std::vector<Tuned*>& knobs);

  const std::shared_ptr<const Clock> clock_;
  const bool own_thread_;
  const std::shared_ptr<NodeStats> output_;
  const std::string memory_key_;
  const bool remember_;
  const std::shared_ptr<TunerMemory> memory_;  // null when nothing is remembered
  TunerPolicy policy_;                         // the tuner thread's (or step()'s caller's)
  // The tuner's time 0 on the clock: when the first knob came, less a resumed memo's
  // elapsed_s (under mu_).
  int64_t start_ns_ = 0;
  int64_t last_ns_ = 0, out_next_ns_ = 0, cpu_ns_ = 0;  // at the last window's end
  bool started_ = false;
  // Remembering, under mu_: the memo resumed (its knobs' values are given to knobs as they
  // come), where from ("memory", "state"; "": none), a last change for the policy to take
  // at the next window, the policy's last change as of the last window, the windows of
  // the tuners before, and whether stop() has stored.
  std::optional<TunerMemo> resumed_;
  std::string resumed_from_;
  std::optional<std::optional<double>> pending_last_change_;
  std::optional<double> last_change_s_;
  int64_t windows_before_ = 0;
  bool stored_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::unique_ptr<Tuned>> knobs_;
  std::thread thread_;
  // The decision loop (add_scaler): set under mu_, then read by the thread of the windows.
  std::shared_ptr<ScalePolicy> scaler_;
  std::shared_ptr<NodeStats> scaler_source_;
  // Written by the tuner thread under mu_.
  nlohmann::json changes_ = nlohmann::json::array();
  int64_t windows_ = 0;
};

}  // namespace dataecho
