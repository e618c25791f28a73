// ElasticPlan: the pieces of a source's records and their deal to lanes per epoch
// (include/dataecho/ops/elastic.h).
#include <numeric>

#include "dataecho/core/rng.h"
#include "dataecho/ops/elastic.h"

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

}  // namespace dataecho
