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
#pragma once

#include <cstdint>
#include <memory>
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

}  // namespace dataecho
