// Dataset and Iterator: the pull-iterator contract every pipeline node follows.
//
// A Dataset is an immutable description of a node (an operator and its options, with
// its input datasets); make_iterator() starts one pass over it. An Iterator has one
// blocking next() that returns the next Example or nullopt at the end of the stream,
// and throws dataecho::Error naming the node and the input position on failure.
// Iterators that own threads stop and join them in their destructor, whatever state
// they are in; the cancellation token in the IteratorContext wakes them.
//
// Thread-safety: Datasets are immutable and safe to share. An Iterator is used by one
// consumer thread at a time (its own worker threads are its business).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataecho/core/cancellation.h"
#include "dataecho/core/error.h"
#include "dataecho/core/example.h"
#include "dataecho/core/state.h"
#include "dataecho/core/stats.h"

namespace dataecho {

class Dataset;
class Tuner;

struct IteratorContext {
  std::shared_ptr<CancellationToken> cancel = CancellationToken::make();
  // The pass over the data this iterator serves: `repeat` counts its passes here so
  // that a seeded shuffle below it reshuffles each epoch.
  int64_t epoch = 0;
  // The pipeline's tuner, to which nodes with "auto" settings hand their knobs
  // (core/tuner.h); null outside a Pipeline, where such settings keep their start value.
  std::shared_ptr<Tuner> tuner;
};

class Iterator {
 public:
  virtual ~Iterator() = default;

  // The next element, or nullopt at the end. Counts the element in the node's stats.
  // The time spent inside next() is sampled: a cheap node (under kTimeEveryCallNs per
  // call) without threads of its own is timed on one call in kSampleStride, and that call's time
  // stands for the untimed calls since the previous timed one (the choice to time a call depends
  // only on earlier calls); a slow node, or one that owns threads (whose next() blocks in bursts),
  // is timed on every call. Reading the clock costs 20 to 100 ns on a VM, more than a cheap node's
  // work. Element, row and byte counts stay exact.
  std::optional<Example> next();
  static constexpr uint32_t kSampleStride = 16;
  static constexpr int64_t kTimeEveryCallNs = 20'000;

  // The iterator's position, such that restore() on a fresh iterator of the same
  // dataset continues with exactly the elements this one would have produced next.
  virtual void save(StateWriter& writer) = 0;
  virtual void restore(StateReader& reader) = 0;

 protected:
  virtual std::optional<Example> next_impl() = 0;

  // The node's label for errors ("3:shuffle"), set by Dataset::make_iterator.
  const std::string& label() const { return *label_; }
  NodeStats* stats() const { return stats_; }

 private:
  friend class Dataset;
  NodeStats* stats_ = nullptr;
  const std::string* label_ = nullptr;
  uint32_t untimed_left_ = 0;  // calls to run untimed before the next timed one
  uint32_t stride_ = 1;        // calls the next timed one stands for
  // Keeps the dataset (and so its options, inputs and label) alive as long as any
  // iterator over it: iterators may refer to their dataset's members.
  std::shared_ptr<const Dataset> dataset_;
};

class Dataset : public std::enable_shared_from_this<Dataset> {
 public:
  virtual ~Dataset() = default;

  // The operator's name ("shuffle"); the node's label adds its position in the pipeline.
  virtual std::string op_name() const = 0;
  // True for nodes that run their own threads (their stats measure busy time themselves).
  virtual bool owns_threads() const { return false; }
  // For a source over several shards (files): one dataset per shard, in a stable order,
  // for `interleave` and file-level `shard`. Empty for every other node.
  virtual std::vector<std::shared_ptr<const Dataset>> shards() const { return {}; }
  // For a source that splits itself for `shard` more cheaply than into shards() (one
  // dataset per file would be 200,000 of them): its elements at positions index,
  // index + num_shards, ... of its own order, as a dataset with the same label and
  // stats. nullptr (the default): `shard` uses shards() or drops elements instead.
  virtual std::shared_ptr<const Dataset> shard_of(int64_t /*num_shards*/, int64_t /*index*/) const {
    return nullptr;
  }
  // False where the node's elements are counted by the iterators it reads (a source
  // over shards, whose shards count into its stats however they are read), so that its
  // own iterator does not count them a second time.
  virtual bool counts_elements() const { return true; }

  // The dataset must be owned by a shared_ptr (all make_* functions return one).
  std::unique_ptr<Iterator> make_iterator(const IteratorContext& ctx) const;

  // Gives the node its label and its stats; called once while a pipeline is assembled.
  // A source with shards passes both on to its shards, so they share the source's stats.
  virtual void attach(std::string label, std::shared_ptr<NodeStats> stats);
  const std::string& label() const { return label_; }
  const std::shared_ptr<NodeStats>& node_stats() const { return stats_; }

 protected:
  virtual std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const = 0;

 private:
  std::string label_ = "dataset";
  std::shared_ptr<NodeStats> stats_;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

}  // namespace dataecho
