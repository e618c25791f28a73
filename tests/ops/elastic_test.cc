// Elastic order's first parts: the plan (pieces of balanced record ranges over a
// source's shards, permuted per epoch and dealt to lanes), the lane source that reads a
// lane's pieces, and the lane salt of shuffle and echo (none without a lane).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/echo.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/ops/shuffle.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;

std::vector<int64_t> ids_of(const DatasetPtr& ds, const IteratorContext& ctx = {}) {
  auto it = ds->make_iterator(ctx);
  return testing::ids(testing::drain(*it));
}

IteratorContext lane_ctx(int64_t lane, int64_t epoch) {
  IteratorContext ctx;
  ctx.lane = lane;
  ctx.epoch = epoch;
  return ctx;
}

// Shards of the given record counts; the odd-numbered ones have record offsets (record
// r of shard s starts at byte 1000 * s + 10 * r), as a file source's index has.
std::vector<ShardIndex> index_of(const std::vector<int64_t>& records) {
  std::vector<ShardIndex> index;
  for (size_t s = 0; s < records.size(); ++s) {
    ShardIndex ix;
    ix.records = records[s];
    if (s % 2 == 1) {
      for (int64_t r = 0; r <= ix.records; ++r) ix.offsets.push_back(1000 * s + 10 * r);
    }
    index.push_back(ix);
  }
  return index;
}

// Checks that the plan's pieces, in order, cover every record of `records` once, in
// order, with the index's offsets, and that their sizes differ by at most one.
void expect_balanced_cover(const std::vector<int64_t>& records, int64_t lanes, int64_t m) {
  SCOPED_TRACE("lanes " + std::to_string(lanes) + ", pieces per lane " + std::to_string(m));
  ElasticPlan plan(index_of(records), lanes, m, 5);
  ASSERT_EQ(plan.pieces().size(), static_cast<size_t>(lanes * m));
  std::vector<std::pair<int64_t, int64_t>> read, all;
  for (size_t s = 0; s < records.size(); ++s)
    for (int64_t r = 0; r < records[s]; ++r) all.emplace_back(s, r);
  int64_t smallest = plan.records(), largest = 0;
  for (const Piece& piece : plan.pieces()) {
    int64_t size = 0;
    for (const RecordRange& range : piece) {
      EXPECT_LT(range.begin, range.end);
      const int64_t offset = range.shard % 2 == 1 ? 1000 * range.shard + 10 * range.begin : 0;
      EXPECT_EQ(range.offset, static_cast<uint64_t>(offset));
      for (int64_t r = range.begin; r < range.end; ++r) read.emplace_back(range.shard, r);
      size += range.end - range.begin;
    }
    smallest = std::min(smallest, size);
    largest = std::max(largest, size);
  }
  EXPECT_EQ(read, all);
  EXPECT_LE(largest - smallest, 1);
  EXPECT_EQ(plan.records(), static_cast<int64_t>(all.size()));
}

TEST(ElasticPlan, PiecesCoverEveryRecordOnceAndDifferByAtMostOne) {
  expect_balanced_cover({7, 0, 13, 5, 1}, 3, 4);  // pieces cross shard boundaries
  expect_balanced_cover({7, 0, 13, 5, 1}, 1, 1);
  expect_balanced_cover({1000}, 12, 4);
  expect_balanced_cover({2, 3}, 4, 2);  // fewer records than pieces: some are empty
  expect_balanced_cover({}, 2, 2);
  // From a source's own index: a range of 4 shards.
  ElasticPlan plan = ElasticPlan::of(*make_range({103, 4}), 6, 2, 1);
  EXPECT_EQ(plan.records(), 103);
  EXPECT_EQ(plan.shards().size(), 4u);
  EXPECT_NE(error_of([] { ElasticPlan(index_of({3}), 0, 4, 1); }).find("lanes must be >= 1"),
            std::string::npos);
}

TEST(ElasticPlan, EpochsPermutePiecesAndTheSameSeedAndEpochAgree) {
  const int64_t lanes = 6, m = 4;
  ElasticPlan plan(index_of({500, 300}), lanes, m, 42);
  ElasticPlan same(index_of({500, 300}), lanes, m, 42);
  ElasticPlan other(index_of({500, 300}), lanes, m, 43);
  std::vector<int64_t> identity(lanes * m);
  for (int64_t p = 0; p < lanes * m; ++p) identity[static_cast<size_t>(p)] = p;
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<int64_t> order = plan.epoch_order(epoch);
    EXPECT_EQ(order, same.epoch_order(epoch));
    EXPECT_NE(order, other.epoch_order(epoch));
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity);  // a permutation
    orders.insert(order);
    std::vector<int64_t> dealt;
    for (int64_t k = 0; k < lanes; ++k) {
      std::vector<int64_t> mine = plan.lane_pieces(k, epoch);
      ASSERT_EQ(mine.size(), static_cast<size_t>(m));
      EXPECT_TRUE(std::equal(mine.begin(), mine.end(), order.begin() + k * m));
      dealt.insert(dealt.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(dealt, order);
  }
  EXPECT_EQ(orders.size(), 4u);  // each epoch its own order
  EXPECT_NE(orders.count(identity), 1u);
  EXPECT_NE(error_of([&] { plan.lane_pieces(lanes, 0); }).find("lane 6 is not one of"),
            std::string::npos);
}

// tfrecord shards of 9, 0, 40 and 17 records, for lane sources over files.
DatasetPtr tfrecord_shards() {
  std::string dir = testing::temp_dir();
  TfRecordOptions o;
  o.raw = true;
  int64_t counts[] = {9, 0, 40, 17};
  for (int s = 0; s < 4; ++s) {
    o.uris.push_back(dir + "/lanes-" + std::to_string(s) + ".tfrecord");
    TfRecordWriter w(o.uris.back());
    for (int64_t r = 0; r < counts[s]; ++r) w.write("record " + std::to_string(r));
    w.close();
  }
  return make_tfrecord_source(o);
}

void expect_lanes_read_every_record_once(const DatasetPtr& source, int64_t lanes, int64_t m) {
  auto plan = std::make_shared<const ElasticPlan>(ElasticPlan::of(*source, lanes, m, 9));
  DatasetPtr lane_source = make_lane_source(source, plan);
  std::vector<int64_t> full = ids_of(source);
  std::sort(full.begin(), full.end());
  std::vector<std::vector<int64_t>> first_epoch;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    std::vector<int64_t> together;
    for (int64_t k = 0; k < lanes; ++k) {
      std::vector<int64_t> lane = ids_of(lane_source, lane_ctx(k, epoch));
      // The lane's slots (its shards, for an interleave) read its pieces in turn.
      std::vector<int64_t> slots;
      for (const DatasetPtr& slot : lane_source->shards()) {
        std::vector<int64_t> piece = ids_of(slot, lane_ctx(k, epoch));
        slots.insert(slots.end(), piece.begin(), piece.end());
      }
      EXPECT_EQ(slots, lane);
      together.insert(together.end(), lane.begin(), lane.end());
      if (epoch == 0) first_epoch.push_back(lane);
      if (epoch == 1 && k == 0) {
        EXPECT_NE(lane, first_epoch[0]);  // the pieces are dealt anew
      }
    }
    std::sort(together.begin(), together.end());
    EXPECT_EQ(together, full);
  }
}

TEST(LaneSource, LanesTogetherReadEveryRecordOnce) {
  {
    SCOPED_TRACE("range");
    expect_lanes_read_every_record_once(make_range({103, 4}), 6, 2);
  }
  {
    SCOPED_TRACE("tfrecord");
    expect_lanes_read_every_record_once(tfrecord_shards(), 4, 3);
  }
}

TEST(LaneSource, RestoresInsideALane) {
  DatasetPtr source = tfrecord_shards();
  auto plan = std::make_shared<const ElasticPlan>(ElasticPlan::of(*source, 2, 4, 3));
  DatasetPtr lanes = make_lane_source(source, plan);
  std::vector<int64_t> whole = ids_of(lanes, lane_ctx(1, 2));
  ASSERT_GT(whole.size(), 20u);
  auto it = lanes->make_iterator(lane_ctx(1, 2));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(it->next());
  StateWriter w;
  it->save(w);
  auto resumed = lanes->make_iterator(lane_ctx(1, 2));
  StateReader r(w.data());
  resumed->restore(r);
  std::vector<int64_t> rest;
  for (const Example& e : testing::drain(*resumed)) rest.push_back(e.id());
  EXPECT_EQ(rest, std::vector<int64_t>(whole.begin() + 20, whole.end()));
}

TEST(LaneSource, AnIteratorWithoutALaneIsRefused) {
  DatasetPtr source = make_range({10});
  auto plan = std::make_shared<const ElasticPlan>(ElasticPlan::of(*source, 3, 1, 3));
  DatasetPtr lanes = make_lane_source(source, plan);
  EXPECT_NE(error_of([&] { lanes->make_iterator({}); }).find("made for lane -1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lanes->make_iterator(lane_ctx(3, 0)); }).find("(0 to 2)"),
            std::string::npos);
}

// A shuffle's order and an echo's fractional draws over range(20), epochs 0 and 1, as
// the code drew them before lanes existed (ids of the shuffle; ids the echo repeats).
const std::vector<std::vector<int64_t>> kShuffleOrders = {
    {2, 5, 3, 9, 8, 7, 1, 4, 11, 6, 12, 15, 14, 10, 0, 16, 13, 18, 19, 17},
    {5, 8, 0, 2, 9, 12, 4, 13, 14, 16, 11, 18, 3, 17, 19, 7, 1, 15, 6, 10}};
const std::vector<std::vector<int64_t>> kEchoRepeats = {{0, 1, 2, 4, 8, 10, 11, 12, 13, 19},
                                                        {0, 2, 4, 5, 7, 10, 13, 15, 16, 17, 19}};

std::vector<int64_t> shuffle_order(const IteratorContext& ctx) {
  ShuffleOptions o;
  o.buffer = 8;
  o.seed = 7;
  return ids_of(make_shuffle(make_range({20}), o), ctx);
}

std::vector<int64_t> echo_repeats(const IteratorContext& ctx) {
  EchoOptions o;
  o.factor = 1.5;
  o.seed = 3;
  auto it = make_echo(make_range({20}), o)->make_iterator(ctx);
  std::vector<int64_t> repeated;
  for (const Example& e : testing::drain(*it))
    if (e.echo() == 1) repeated.push_back(e.id());
  return repeated;
}

TEST(LaneSalt, WithoutALaneShuffleAndEchoDrawAsBefore) {
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    EXPECT_EQ(shuffle_order(lane_ctx(-1, epoch)), kShuffleOrders[epoch]);
    EXPECT_EQ(echo_repeats(lane_ctx(-1, epoch)), kEchoRepeats[epoch]);
  }
}

TEST(LaneSalt, EachLaneDrawsItsOwnOrderAndTheSameLaneAgrees) {
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> lane0 = shuffle_order(lane_ctx(0, epoch));
    EXPECT_EQ(lane0, shuffle_order(lane_ctx(0, epoch)));
    EXPECT_NE(lane0, shuffle_order(lane_ctx(1, epoch)));
    EXPECT_NE(lane0, kShuffleOrders[epoch]);
    std::vector<int64_t> echo0 = echo_repeats(lane_ctx(0, epoch));
    EXPECT_EQ(echo0, echo_repeats(lane_ctx(0, epoch)));
    EXPECT_NE(echo0, echo_repeats(lane_ctx(1, epoch)));
    EXPECT_NE(echo0, kEchoRepeats[epoch]);
  }
}

}  // namespace
}  // namespace dataecho
