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
  // The lane of an elastic pipeline this iterator reads (ops/elastic.h): a LaneSource
  // reads that lane's pieces, and shuffle and echo salt their order draws with it
  // (lane_seed in core/rng.h). -1: no lane, and nothing is salted.
  int64_t lane = -1;
  // The pipeline's tuner, to which nodes with "auto" settings hand their knobs
  // (core/tuner.h); null outside a Pipeline, where such settings keep their start value.
  std::shared_ptr<Tuner> tuner;
};

// Where the records of one shard of a source lie (Dataset::record_index).
struct ShardIndex {
  std::string uri;      // the shard's file; "" for a source without files
  int64_t records = 0;  // records in the shard, those a read skips (bad, empty) included
  int64_t bytes = -1;   // the file's size; -1 where there is no file or it is not known
  // The byte offset where each record starts, then where the last one ends (records + 1
  // values); empty for a random-access source, whose record k is found by its number.
  std::vector<uint64_t> offsets;
};

// Records [begin, end) of shard `shard` of a source; `offset` is where record `begin`
// starts (ShardIndex::offsets[begin]; 0 for a random-access source).
struct RecordRange {
  int64_t shard = 0;
  int64_t begin = 0;
  int64_t end = 0;
  uint64_t offset = 0;
};

// Refuses a range that is not one of `shards` shards (-1: a shard of a larger source,
// whose number that source checked) or runs past `records` (-1: not known), naming the
// node (`label`) and `input` (the file).
void check_record_range(const std::string& label, const RecordRange& range, int64_t shards,
                        int64_t records, const std::string& input = "");

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
  // A source whose records can be located reads any range of a shard's records:
  // not_seekable_reason() is "" for it, and otherwise says why not ("tar shard x.tar.gz
  // is compressed (gzip): ..."), opening the files to find out where that depends on
  // their bytes. record_index() gives each shard's record count and where each record
  // starts (a scan of a tfrecord, tar or text file, or a tfrecord's sidecar index; free
  // for idx, range, files and memory). Its shards are the source's files, or a `range`'s
  // parts (shards()); files and memory are one shard. record_range() is a dataset of
  // exactly one shard's records [begin, end), read from `offset` on, with the ids a full
  // read gives them, under this node's label and stats; a compressed file refuses one
  // that starts past record 0 when it opens. The defaults (every other node) throw
  // kInvalidArgument with not_seekable_reason().
  virtual std::string not_seekable_reason() const;
  virtual std::vector<ShardIndex> record_index() const;
  virtual std::shared_ptr<const Dataset> record_range(const RecordRange& range) const;

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
