// What a pipeline's tuner learned, kept for the next pipeline of the same definition
// (`"autotune": {"remember": true}`, the default). A PyTorch-style loop builds a pipeline
// per epoch; without this each new pipeline's tuner starts again from the spec's start
// values and its warm-up, and a pass shorter than the warm-up never leaves it.
//
// TunerMemo: the knobs' values (named by their node's stats name and param) and the
// state the tuner's rules need to go on from there: its time (the warm-up's progress),
// its last change, the knobs whose raise was taken back and until when, and a raise being
// judged. A Tuner stores its memo while it runs and when it stops; a new Tuner given one
// sets its knobs to the memo's values as they are added and goes on from its time
// (core/tuner.h). The pipeline's saved state (format v3) carries the memo too.
//
// TunerMemory: memos by key, at most `capacity` (64 for the process's), the least
// recently used dropped first. The key is the pipeline definition's canonical JSON
// without its seeds and its budgets (PipelineDef::tuner_memory_key()): neither changes
// what a stage costs. Two live pipelines of one definition share an entry: the last to
// store wins.
// Thread-safety: TunerMemory from any thread; TunerMemo is a value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dataecho {

struct TunerMemo {
  struct Knob {
    std::string node;   // its node's stats name ("3:map(decode_augment)")
    std::string param;  // "parallelism", "buffer", "buffer_per_shard", "max_copies"
    int64_t value = 0;
    double blocked_until_s = -1;  // a raise taken back: left alone until then; -1: not
    bool trial = false;           // its last raise is being judged:
    int64_t trial_from = 0;       //   the value before it
    double rate_before = 0;       //   and the node's elements/s before it
    friend bool operator==(const Knob&, const Knob&) = default;
  };
  // The tuner's time when stored (s since its first knob, carried over from the memo it
  // resumed from): a tuner resumed from it starts at this time, so that a warm-up spread
  // over several short pipelines ends once, and the change interval after it holds.
  double elapsed_s = 0;
  std::optional<double> last_change_s;  // the tuner's last change (its time); none: never
  int64_t windows = 0;                  // windows measured, all pipelines together
  std::vector<Knob> knobs;

  const Knob* find(const std::string& node, const std::string& param) const;
  // {"version": 1, "elapsed_s", "last_change_s" (null: never), "windows", "knobs": [{node,
  // param, value, blocked_until_s, trial, trial_from, rate_before}]}.
  nlohmann::json to_json() const;
  // Throws Error(kInvalidArgument, "autotune") naming what is missing or mistyped.
  static TunerMemo from_json(const nlohmann::json& j);
  friend bool operator==(const TunerMemo&, const TunerMemo&) = default;
};

class TunerMemory {
 public:
  static constexpr size_t kCapacity = 64;  // definitions
  explicit TunerMemory(size_t capacity = kCapacity);
  // The process's: every pipeline built from a PipelineDef uses it unless told otherwise.
  static const std::shared_ptr<TunerMemory>& global();

  // The memo stored under `key`, now the most recently used; nullopt: none.
  std::optional<TunerMemo> find(const std::string& key);
  // Stores (replaces) the memo under `key` as the most recently used; past the capacity
  // the least recently used entry goes.
  void store(const std::string& key, TunerMemo memo);
  void clear();
  size_t size() const;
  size_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<std::string, TunerMemo>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

// Forgets what every tuner of the process learned (TunerMemory::global()): pipelines
// built afterwards tune from their spec's start values. Pipelines alive now store again
// when they next measure a window or stop.
void clear_tuner_memory();

}  // namespace dataecho
