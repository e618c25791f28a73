// ElasticPlan: the pieces of a source's records and their deal to lanes per epoch, and the
// lanes a rank or consumer owns (include/dataecho/ops/elastic.h).
#include <numeric>

#include "dataecho/core/rng.h"
#include "dataecho/ops/elastic.h"
#include "elastic_state.h"

namespace dataecho {
namespace {

// floor(total * p / parts) without overflowing for any count of records.
int64_t split_point(int64_t total, int64_t p, int64_t parts) {
  return total / parts * p + total % parts * p / parts;
}

void check_count(const char* name, int64_t v) {
  if (v < 1)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                std::string(name) + " must be >= 1, got " + std::to_string(v));
}

// "1, 2, 3, 4, 6 or 12": the world sizes that divide `lanes`.
std::string divisors(int64_t lanes) {
  std::vector<int64_t> d;
  for (int64_t n = 1; n <= lanes; ++n)
    if (lanes % n == 0) d.push_back(n);
  if (d.size() == 1) return std::to_string(d[0]);
  const int64_t last = d.back();
  d.pop_back();
  return elastic_state::join(d) + " or " + std::to_string(last);
}

}  // namespace

ElasticPlan::ElasticPlan(const std::vector<ShardIndex>& index, int64_t lanes,
                         int64_t pieces_per_lane, uint64_t seed)
    : lanes_(lanes), pieces_per_lane_(pieces_per_lane), seed_(seed) {
  check_count("lanes", lanes);
  check_count("pieces_per_lane", pieces_per_lane);
  for (const ShardIndex& s : index) {
    records_ += s.records;
    shards_.push_back({s.uri, s.records, s.bytes, {}});
  }
  const int64_t parts = lanes * pieces_per_lane;
  size_t shard = 0;
  int64_t shard_start = 0;  // the first global record of `shard`
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = split_point(records_, p, parts);
    const int64_t end = split_point(records_, p + 1, parts);
    Piece piece;
    for (int64_t at = begin; at < end;) {
      while (at >= shard_start + index[shard].records) shard_start += index[shard++].records;
      const ShardIndex& s = index[shard];
      RecordRange r;
      r.shard = static_cast<int64_t>(shard);
      r.begin = at - shard_start;
      r.end = std::min(end, shard_start + s.records) - shard_start;
      r.offset = s.offsets.empty() ? 0 : s.offsets[static_cast<size_t>(r.begin)];
      piece.push_back(r);
      at = shard_start + r.end;
    }
    pieces_.push_back(std::move(piece));
  }
}

ElasticPlan ElasticPlan::of(const Dataset& source, int64_t lanes, int64_t pieces_per_lane,
                            uint64_t seed) {
  std::string why = source.not_seekable_reason();
  if (!why.empty()) throw_error(ErrorCode::kInvalidArgument, source.label(), why);
  return ElasticPlan(source.record_index(), lanes, pieces_per_lane, seed);
}

std::vector<int64_t> ElasticPlan::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(pieces_.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch)));
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[static_cast<size_t>(rng.uniform(i))]);
  return order;
}

std::vector<int64_t> ElasticPlan::lane_pieces(int64_t lane, int64_t epoch) const {
  if (lane < 0 || lane >= lanes_)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                "lane " + std::to_string(lane) + " is not one of the plan's " +
                    std::to_string(lanes_) + " lanes");
  std::vector<int64_t> order = epoch_order(epoch);
  auto first = order.begin() + lane * pieces_per_lane_;
  return std::vector<int64_t>(first, first + pieces_per_lane_);
}

std::vector<int64_t> elastic_lanes_of(int64_t lanes, int64_t world_size, int64_t rank,
                                      int64_t consumers_per_rank, int64_t consumer) {
  if (lanes < 1 || world_size < 1 || lanes % world_size != 0)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                std::to_string(lanes) + " lanes do not split over " + std::to_string(world_size) +
                    " ranks: use " + (lanes < 1 ? std::string("lanes >= 1") : divisors(lanes)));
  if (rank < 0 || rank >= world_size)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                "rank " + std::to_string(rank) + " is not one of the " +
                    std::to_string(world_size) + " ranks (0 to " + std::to_string(world_size - 1) +
                    ")");
  const int64_t w = consumers_per_rank, n = world_size;
  if (w < 1 || lanes % (n * w) != 0)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                std::to_string(lanes) + " lanes do not split over " + std::to_string(n * w) +
                    " consumers (" + std::to_string(n) + (n == 1 ? " rank" : " ranks") + " of " +
                    std::to_string(w) + " consumers each): use " + divisors(lanes / n) +
                    " consumers per rank");
  if (consumer < 0 || consumer >= w)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                "consumer " + std::to_string(consumer) + " is not one of the rank's " +
                    std::to_string(w) + " consumers (0 to " + std::to_string(w - 1) + ")");
  std::vector<int64_t> owned;
  for (int64_t k = rank + n * consumer; k < lanes; k += n * w) owned.push_back(k);
  return owned;
}

}  // namespace dataecho
