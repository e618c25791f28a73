// Elastic order: the records of a source cut into pieces that lanes read, so that a job
// can resume on another number of ranks (docs/history/2026-12-06-elastic-resume-plan.md).
//
// A piece is a balanced range of the source's records taken end to end over its shards
// (it may cross a file boundary): the plan cuts the T records into P = lanes *
// pieces_per_lane pieces of floor or ceil of T / P records, fixed for the job. Each
// epoch permutes the pieces, seeded by (the plan's seed, epoch), and deals
// pieces_per_lane of them to each lane: lane k reads pieces order[k * m .. (k + 1) * m)
// of the epoch's order, in that order. A lane is the unit of state and ownership; its
// iterator reads through a LaneSource, which takes the lane and the epoch from its
// IteratorContext (`lane`, `epoch`).
//
// The merge (make_elastic_batch) reads one lane per thread over the stages before the
// batch and collates the global batch G: global position i is element i div K of lane
// i mod K, global batch s is positions [sG, (s + 1)G), and rank r of N owns the lanes k
// with k mod N == r (N divides K), so its batch of step s is its positions of the global
// batch, in increasing position. A position past its lane's end is a hole at a fixed
// place: the end batches shrink alike for every N. Its state (merge_elastic_states) is
// lane-indexed, so the ranks' states together restore on any N that divides K.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/dataset.h"

namespace dataecho {

// A piece: the ranges of shards' records it covers, in read order (empty for a piece of
// no records, where the source has fewer records than pieces).
using Piece = std::vector<RecordRange>;

class ElasticPlan {
 public:
  // Cuts the records of `index` (a source's record_index()) into lanes *
  // pieces_per_lane pieces. Throws kInvalidArgument for lanes or pieces_per_lane < 1.
  // The plan keeps each shard's uri, record count and size, not its record offsets.
  ElasticPlan(const std::vector<ShardIndex>& index, int64_t lanes, int64_t pieces_per_lane,
              uint64_t seed);
  // The plan of `source`'s records; throws kInvalidArgument with the source's
  // not_seekable_reason() where its records cannot be read from their middle.
  static ElasticPlan of(const Dataset& source, int64_t lanes, int64_t pieces_per_lane,
                        uint64_t seed);

  int64_t lanes() const { return lanes_; }
  int64_t pieces_per_lane() const { return pieces_per_lane_; }
  uint64_t seed() const { return seed_; }
  int64_t records() const { return records_; }
  const std::vector<ShardIndex>& shards() const { return shards_; }
  const std::vector<Piece>& pieces() const { return pieces_; }

  // The epoch's permutation of the pieces' numbers (a function of seed and epoch alone).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // The numbers of the pieces lane `lane` reads in `epoch`, in read order; throws
  // kInvalidArgument for a lane outside [0, lanes).
  std::vector<int64_t> lane_pieces(int64_t lane, int64_t epoch) const;

 private:
  int64_t lanes_;
  int64_t pieces_per_lane_;
  uint64_t seed_;
  int64_t records_ = 0;
  std::vector<ShardIndex> shards_;
  std::vector<Piece> pieces_;
};

// A source that reads, for the lane and epoch of the IteratorContext it is iterated
// under, that lane's pieces of `source` (through its record_range()), in order, with the
// ids a full read gives them. Its shards() are the lane's pieces_per_lane piece slots
// (slot j reads the lane's j-th piece), so an `interleave` over it works unchanged. Its
// elements are counted in `source`'s stats, as a sharded source's. Iterating it without
// a lane in [0, lanes) throws kInvalidArgument. `source` must be the one the plan was
// made of.
DatasetPtr make_lane_source(DatasetPtr source, std::shared_ptr<const ElasticPlan> plan);

struct ElasticBatchOptions {
  int64_t world_size = 1;       // N: ranks; must divide the plan's lanes
  int64_t rank = 0;             // r in [0, N)
  int64_t global_batch = 32;    // G: rows of a step over all ranks
  bool drop_remainder = false;  // true: a rank ends at the first step one of its lanes
                                // cannot fill; false: at the first step it has no row in
  // Batch echo, absorbed: each global batch s is returned floor(e) times, plus once with
  // probability e - floor(e) drawn from (echo_seed, epoch, s) (the same on every rank);
  // copy j raises every row's echo index by j. 1: no batch echo.
  double batch_echo = 1;
  uint64_t echo_seed = 0;
  // Prefetch, absorbed: a thread collates up to this many batches ahead (0: the batch is
  // collated in next()).
  int64_t prefetch = 0;
  // Elements each lane's thread reads ahead; 0: max(2, ceil(G / K)).
  int64_t lane_queue = 0;
  // Map-and-batch fusion across lanes: where a lane's last stage is a map that keeps
  // order, its output's largest tensor is computed straight into its row of the rank's
  // batch (ops/map_and_batch.h), so that the merge does not copy it.
  bool place_rows = true;
  // Consumers of the rank's stream (Python DataLoader workers): consumer w of W acts as
  // consumer r + N w of N W with global batch G W, so each of its batches still has
  // about G / N rows. N W must divide the lanes. Batch echo needs W = 1.
  int64_t consumers_per_rank = 1;
  int64_t consumer = 0;
  // Adds to each batch the int64 field "__lanes__" [L, 2]: each owned lane and the
  // elements of it in this iterator's batches so far, this one included (from 0 at the
  // start and at a restore): what a DataLoader's snapshot and skip count.
  bool lane_counts = false;
};

// The lanes of `lanes` that rank `rank` of `world_size` owns (k mod world_size == rank);
// throws kInvalidArgument where world_size does not divide lanes ("12 lanes do not split
// over 5 ranks: use 1, 2, 3, 4, 6 or 12") or the rank is not one of the world's. With
// consumers per rank W, consumer w's: those of consumer rank + world_size * w of
// world_size * W ("12 lanes do not split over 8 consumers (2 ranks of 4 consumers each):
// use 1, 2, 3 or 6 consumers per rank").
std::vector<int64_t> elastic_lanes_of(int64_t lanes, int64_t world_size, int64_t rank,
                                      int64_t consumers_per_rank = 1, int64_t consumer = 0);

// Rank `rank`'s batches of the global order over `lane`, the stages before the batch
// over make_lane_source(source, plan): one reading thread per owned lane (iterators of
// `lane` with IteratorContext::lane set), collated through the batch builder. Its state
// (the root of a Pipeline's state) is a JSON header, "dataecho-elastic/1" (the plan's
// shards, the step and batch-echo copy the consumer is at, each saved lane's position),
// then one blob per owned lane: the lane's iterator state and its queue, with the rows
// of batches collated but not yet returned put back at its front (buffers are saved by
// content, never read again). It restores from a state holding at least its own lanes:
// its own state on the same (N, r), or merge_elastic_states of every rank's.
// Memory: per rank, (K / N) * lane_queue elements and `prefetch` + 1 batches, besides
// what the lanes' own stages hold (with place_rows, the rows the lanes' maps compute
// ahead are in the batches of the steps they fall in: about as many rows).
DatasetPtr make_elastic_batch(DatasetPtr lane, std::shared_ptr<const ElasticPlan> plan,
                              const ElasticBatchOptions& options);

// One Pipeline state of the lanes of every rank's state (Pipeline::save() of each rank
// of an elastic pipeline, any order). Refuses, with kInvalidArgument, states of
// different pipelines (fingerprints: "give every rank the same seed"), saved at
// different steps or batch-echo copies ("rank 1 of 2 was saved at step 58 (batch copy
// 0), rank 0 of 2 at 57 ..."), a lane in two states and lanes in none, naming them.
// Keeps rank 0's count of elements returned and tuner memo.
// same_step false: states saved at different steps merge (DataLoader workers' snapshots,
// each taken after its own batch): every lane keeps its own position, and the merge
// restored from them takes each lane's next elements from where it stands; the merged
// state's step is the earliest. Refused under batch echo when the steps differ.
std::string merge_elastic_states(const std::vector<std::string>& rank_states,
                                 bool same_step = true);

// `state` (an elastic Pipeline state holding every lane of `skip`) with a restore-time
// skip: the merge restored from it drops the next skip[lane] elements of each lane before
// it takes any (the elements a DataLoader returned after the snapshot the state is). The
// skips add to those the state holds. Refuses a lane the state does not hold and a
// negative count.
std::string with_lane_skips(const std::string& state, const std::map<int64_t, int64_t>& skip);

}  // namespace dataecho
