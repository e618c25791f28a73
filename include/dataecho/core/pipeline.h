// Pipeline: a built chain of nodes with one iterator over it, its stats and its state.
// Thread-safety: next(), save() and restore() from one thread at a time; stats() and
// cancel() from any thread. Destroying a Pipeline cancels it first, so every thread
// inside returns promptly and is joined, whatever it was blocked on.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataecho/core/dataset.h"
#include "dataecho/core/tuner.h"

namespace dataecho {

class Pipeline {
 public:
  // `nodes` are the chain's datasets in order, source first (for stats); `fingerprint`
  // identifies the spec, so that a state saved from another pipeline is refused;
  // `v1_fingerprint`, the same under the first state format (restores states saved
  // before it changed; "" for a pipeline that never had one). `tuning`: the budgets of
  // the tuner that moves "auto" settings (core/tuner.h).
  Pipeline(DatasetPtr root, std::vector<DatasetPtr> nodes, std::string fingerprint = "",
           std::string v1_fingerprint = "", TunerOptions tuning = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next element, or nullopt at the end. After an error has been thrown, the
  // stream is over: later calls return nullopt.
  std::optional<Example> next();

  // The position after the elements returned so far, as bytes; restore() on a fresh
  // pipeline built from the same spec continues with the same elements (deterministic mode).
  // The bytes carry what the tuner of "auto" settings learned (format v3, a TunerMemo):
  // the restored pipeline's tuner goes on from it (unless built with "remember": false).
  // States of formats v1 and v2 restore too, without it.
  std::string save();
  void restore(std::string_view state);
  // The first string of what save() writes (the state's format); merge_elastic_states
  // (ops/elastic.h) reads the states of this format.
  static constexpr std::string_view kStateFormat = "dataecho-pipeline-state-v3";

  int64_t elements_returned() const { return returned_; }
  PipelineStats stats() const;
  void cancel();
  const std::vector<DatasetPtr>& nodes() const { return nodes_; }
  // What the tuner chose and why (Tuner::report()); its "knobs" list is empty when no
  // node has an "auto" setting.
  nlohmann::json tuning() const;
  // Built with TunerOptions::clock (a ManualClock in tests): one window of the tuner,
  // ending at the clock's now (Tuner::step()); the change it made, if any.
  std::optional<TunerChange> tune_step();

 private:
  DatasetPtr root_;
  std::vector<DatasetPtr> nodes_;
  std::string fingerprint_;
  std::string v1_fingerprint_;
  std::shared_ptr<CancellationToken> token_;
  std::shared_ptr<Tuner> tuner_;
  std::unique_ptr<Iterator> it_;
  int64_t returned_ = 0;
  int64_t start_ns_ = 0;
  bool failed_ = false;
};

}  // namespace dataecho
