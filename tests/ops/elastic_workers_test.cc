// Consumers of a rank's elastic stream (Python DataLoader workers, ops/elastic.h's
// consumers_per_rank): W consumers together return the one consumer's epoch, each from
// its own lanes; their snapshots, taken after different batches, merge (same_step
// false) and resume on another number of consumers, the elements returned after each
// snapshot skipped (with_lane_skips), with nothing lost and nothing twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "dataecho/core/pipeline.h"
#include "dataecho/ops/echo.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/shuffle.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;

constexpr int64_t kLanes = 6;
constexpr int64_t kBatch = 12;
constexpr int64_t kPixels = 4096;  // 16 KiB of floats: a row the lanes' maps place

DatasetPtr source() { return make_range({960, 4}); }

std::shared_ptr<const ElasticPlan> plan_of(const DatasetPtr& src) {
  return std::make_shared<const ElasticPlan>(ElasticPlan::of(*src, kLanes, 2, 17));
}

// Consumer w of W of rank r of N over range(960) in 4 shards: lane source -> echo 1.5
// (lanes of unequal length) -> shuffle 3 -> map (noise, pixels; 2 threads, in order) ->
// merge of global batch 12 with lane counts. `batch_echo` only for the refusal.
std::unique_ptr<Pipeline> consumer(int64_t n, int64_t r, int64_t w_count, int64_t w,
                                   double batch_echo = 1) {
  DatasetPtr src = source();
  auto plan = plan_of(src);
  DatasetPtr ds = make_lane_source(src, plan);
  ds = make_echo(ds, {.factor = 1.5, .seed = 5});
  ds = make_shuffle(ds, {.buffer = 3, .seed = 7});
  ds = make_map(ds, {.name = "noise",
                     .fn =
                         [](Example e, const MapContext& ctx) {
                           e.set("noise", Tensor::scalar<double>(ctx.rng_for(e).uniform01()));
                           const int64_t first = e.id() * 8 + e.echo();
                           e.set("pixels_of", Tensor::scalar<int64_t>(first));
                           e.set("pixels",
                                 Tensor::make(DType::kFloat32, {kPixels}, [first](std::byte* b) {
                                   auto* f = reinterpret_cast<float*>(b);
                                   for (int64_t j = 0; j < kPixels; ++j)
                                     f[j] = static_cast<float>(first + j);
                                 }));
                           return e;
                         },
                     .parallelism = 2,
                     .seed = 11});
  ElasticBatchOptions o{.world_size = n,
                        .rank = r,
                        .global_batch = kBatch,
                        .batch_echo = batch_echo,
                        .prefetch = 2,
                        .consumers_per_rank = w_count,
                        .consumer = w,
                        .lane_counts = true};
  DatasetPtr merge = make_elastic_batch(ds, plan, o);
  std::const_pointer_cast<Dataset>(merge)->attach("2:elastic",
                                                  std::make_shared<NodeStats>("2:elastic", false));
  return std::make_unique<Pipeline>(merge, std::vector<DatasetPtr>{src, ds, merge},
                                    "elastic-workers-test");
}

// Each id's lane in epoch 0.
std::map<int64_t, int64_t> lane_of_ids() {
  DatasetPtr src = source();
  DatasetPtr lanes = make_lane_source(src, plan_of(src));
  std::map<int64_t, int64_t> lane_of;
  for (int64_t l = 0; l < kLanes; ++l) {
    IteratorContext ctx;
    ctx.lane = l;
    auto it = lanes->make_iterator(ctx);
    for (const Example& e : testing::drain(*it)) lane_of[e.id()] = l;
  }
  return lane_of;
}

using Key = std::pair<int64_t, int32_t>;  // (id, echo index)

// What consumers returned: the rows, each row's noise, the rows' lanes as __lanes__
// counts them, and what a test must not see.
struct Rows {
  std::vector<Key> keys;
  std::map<Key, double> noise;
  std::map<int64_t, int64_t> lanes;  // lane -> count after the last batch (__lanes__)
  int64_t wrong_pixels = 0;          // rows holding another element's pixels
  int64_t foreign_rows = 0;          // rows of a lane that __lanes__ does not list
  int64_t oversized = 0;             // batches of more than G / N rows
  int64_t placed = 0;                // rows the lanes' maps computed in their batch

  // One batch of a consumer of `n` ranks.
  void add(const Example& b, int64_t n, const std::map<int64_t, int64_t>& lane_of) {
    const Tensor& counts = b.get("__lanes__");
    std::map<int64_t, int64_t> in_batch;
    for (int64_t i = 0; i < counts.shape()[0]; ++i) {
      const int64_t lane = counts.data<int64_t>()[2 * i];
      in_batch[lane] = counts.data<int64_t>()[2 * i + 1] - lanes[lane];
      lanes[lane] = counts.data<int64_t>()[2 * i + 1];
    }
    if (static_cast<int64_t>(b.num_rows()) > kBatch / n) ++oversized;
    for (size_t i = 0; i < b.num_rows(); ++i) {
      const Key key{b.row(i).id, b.row(i).echo};
      keys.push_back(key);
      noise[key] = b.get("noise").data<double>()[i];
      const auto lane = in_batch.find(lane_of.at(key.first));
      if (lane == in_batch.end() || lane->second-- == 0) ++foreign_rows;
      const int64_t first = b.get("pixels_of").data<int64_t>()[i];
      const float* row = b.get("pixels").data<float>() + i * kPixels;
      for (int64_t j = 0; j < kPixels; ++j) {
        if (row[j] != static_cast<float>(first + j)) {
          ++wrong_pixels;
          break;
        }
      }
    }
  }
  // `calls` batches of `p` (all: -1); false where it ended first.
  bool take(Pipeline& p, int64_t n, int64_t calls, const std::map<int64_t, int64_t>& lane_of) {
    for (int64_t c = 0; calls < 0 || c < calls; ++c) {
      std::optional<Example> b = p.next();
      if (!b) {
        placed = p.nodes().back()->node_stats()->counter("placed_rows");
        return false;
      }
      add(*b, n, lane_of);
    }
    placed = p.nodes().back()->node_stats()->counter("placed_rows");
    return true;
  }
  std::vector<Key> sorted() const {
    std::vector<Key> out = keys;
    std::sort(out.begin(), out.end());
    return out;
  }
};

// An epoch of rank r of N read by W consumers.
Rows epoch_of(int64_t n, int64_t r, int64_t w_count, const std::map<int64_t, int64_t>& lane_of) {
  Rows rows;
  for (int64_t w = 0; w < w_count; ++w) {
    Rows one;
    one.take(*consumer(n, r, w_count, w), n, -1, lane_of);
    rows.keys.insert(rows.keys.end(), one.keys.begin(), one.keys.end());
    rows.noise.insert(one.noise.begin(), one.noise.end());
    rows.wrong_pixels += one.wrong_pixels;
    rows.foreign_rows += one.foreign_rows;
    rows.oversized += one.oversized;
  }
  return rows;
}

TEST(ElasticWorkers, ConsumersTogetherReturnTheOneConsumersEpochEachFromItsLanes) {
  const auto lane_of = lane_of_ids();
  const Rows one = epoch_of(1, 0, 1, lane_of);
  ASSERT_GT(one.keys.size(), 960u);  // echo 1.5 repeats about half
  for (auto [n, w_count] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {1, 3}, {1, 6}, {2, 3}, {3, 2}}) {
    Rows all;
    for (int64_t r = 0; r < n; ++r) {
      Rows rank = epoch_of(n, r, w_count, lane_of);
      all.keys.insert(all.keys.end(), rank.keys.begin(), rank.keys.end());
      all.noise.insert(rank.noise.begin(), rank.noise.end());
      all.wrong_pixels += rank.wrong_pixels;
      all.foreign_rows += rank.foreign_rows;
      all.oversized += rank.oversized;
    }
    SCOPED_TRACE("N=" + std::to_string(n) + " W=" + std::to_string(w_count));
    EXPECT_EQ(all.sorted(), one.sorted());
    EXPECT_EQ(all.noise, one.noise);
    EXPECT_EQ(all.foreign_rows, 0);
    EXPECT_EQ(all.oversized, 0);
    EXPECT_EQ(all.wrong_pixels, 0);
  }
}

// W consumers each take a snapshot after `snapshot_at[w]` batches and return
// `consumed[w]` in all; the snapshots merge, the rows returned after them are skipped,
// and `to` consumers go on to the end. The rows returned before the stop and after the
// resume, with the resume's checks.
Rows interrupted(int64_t from, const std::vector<int64_t>& snapshot_at,
                 const std::vector<int64_t>& consumed, int64_t to,
                 const std::map<int64_t, int64_t>& lane_of) {
  Rows rows;
  std::vector<std::string> states;
  std::map<int64_t, int64_t> skip;
  for (int64_t w = 0; w < from; ++w) {
    auto p = consumer(1, 0, from, w);
    Rows mine;
    EXPECT_TRUE(mine.take(*p, 1, snapshot_at[w], lane_of));
    states.push_back(p->save());
    const std::map<int64_t, int64_t> at_snapshot = mine.lanes;
    EXPECT_TRUE(mine.take(*p, 1, consumed[w] - snapshot_at[w], lane_of));
    for (const auto& [lane, count] : mine.lanes) {
      const auto at = at_snapshot.find(lane);
      skip[lane] = count - (at == at_snapshot.end() ? 0 : at->second);
    }
    rows.keys.insert(rows.keys.end(), mine.keys.begin(), mine.keys.end());
    rows.noise.insert(mine.noise.begin(), mine.noise.end());
  }
  const std::string merged = with_lane_skips(merge_elastic_states(states, false), skip);
  int64_t placed = 0;
  for (int64_t w = 0; w < to; ++w) {
    auto p = consumer(1, 0, to, w);
    p->restore(merged);
    rows.take(*p, 1, -1, lane_of);
    placed += rows.placed;
  }
  rows.placed = placed;
  return rows;
}

TEST(ElasticWorkers, SnapshotsAtDifferentBatchesResumeOnAnotherWorkerCountWithSkips) {
  const auto lane_of = lane_of_ids();
  const Rows one = epoch_of(1, 0, 1, lane_of);
  struct Case {
    int64_t from;
    std::vector<int64_t> snapshot_at, consumed;
    int64_t to;
  };
  for (const Case& c : std::vector<Case>{{2, {2, 1}, {5, 3}, 1},
                                         {1, {3}, {4}, 2},
                                         {2, {1, 3}, {4, 3}, 3},
                                         {3, {0, 2, 1}, {2, 4, 3}, 2}}) {
    SCOPED_TRACE("from " + std::to_string(c.from) + " to " + std::to_string(c.to));
    const Rows rows = interrupted(c.from, c.snapshot_at, c.consumed, c.to, lane_of);
    EXPECT_EQ(rows.sorted(), one.sorted());
    EXPECT_EQ(rows.noise, one.noise);
    EXPECT_EQ(rows.wrong_pixels, 0);
    EXPECT_EQ(rows.foreign_rows, 0);
    // The lanes' maps computed rows in the batches of the lanes' restored positions
    // (about 950 of the 1,440 rows when measured; scheduling decides how many).
    EXPECT_GT(rows.placed, 0);
  }
}

TEST(ElasticWorkers, RefusalsNameTheNumbers) {
  EXPECT_NE(error_of([] { elastic_lanes_of(6, 2, 0, 2, 0); })
                .find("6 lanes do not split over 4 consumers (2 ranks of 2 consumers each): use "
                      "1 or 3 consumers per rank"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              elastic_lanes_of(6, 1, 0, 2, 2);
            }).find("consumer 2 is not one of the rank's 2 consumers"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              consumer(1, 0, 2, 0, 2.0);
            }).find("batch echo is not available with 2 consumers per rank"),
            std::string::npos);
  const auto lane_of = lane_of_ids();
  std::vector<std::string> states;
  for (int64_t w = 0; w < 2; ++w) {
    auto p = consumer(1, 0, 2, w);
    Rows rows;
    rows.take(*p, 1, 1 + w, lane_of);
    states.push_back(p->save());
  }
  EXPECT_NE(error_of([&] { merge_elastic_states(states); })
                .find("rank 0 of 1, consumer 1 of 2 was saved at step 2 (batch copy 0), rank 0 "
                      "of 1, consumer 0 of 2 at 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              with_lane_skips(states[0], {{1, 2}});
            }).find("the state does not hold lane 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              with_lane_skips(states[0], {{0, -1}});
            }).find("cannot skip -1 elements of lane 0"),
            std::string::npos);
  auto other = consumer(1, 0, 2, 1);
  EXPECT_NE(error_of([&] {
              other->restore(states[0]);
            }).find("this consumer (rank 0 of 1, consumer 1 of 2) needs 1, 3, 5"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho
