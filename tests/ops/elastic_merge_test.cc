// The elastic merge (ops/elastic.h, make_elastic_batch): the global order for any
// number of ranks, the tail, and resuming on another number of ranks from the merged
// states, over range sources with the variants of the plan (echo before augmentation,
// batch echo, fractional echo).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "dataecho/core/pipeline.h"
#include "dataecho/ops/basic.h"
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

struct Variant {
  std::string name;
  double example_echo = 1;  // echo in the lanes, before the shuffle and the noise map
  int64_t shuffle = 0;      // the lanes' shuffle buffer (0: none)
  double batch_echo = 1;
  int64_t global_batch = 12;
  int64_t records = 120;
  bool drop_remainder = false;
  bool short_lane = false;  // a filter drops ids 0..9, which shortens a lane
  int64_t prefetch = 2;
  // The noise map also computes "pixels" (16 KiB: a row the merge's lanes place in the
  // batch, ops/map_and_batch.h) and "pixels_of", the number its row's values start at.
  bool pixels = false;
  int map_parallelism = 1;
  bool place_rows = true;
};

const Variant kEchoBeforeAugment{.name = "EchoBeforeAugment", .example_echo = 2, .shuffle = 4};
const Variant kBatchEcho{.name = "BatchEcho", .shuffle = 3, .batch_echo = 2, .records = 240};
const Variant kFractionalEcho{.name = "FractionalEcho", .example_echo = 1.5, .records = 160};

// Ids read from the source (right after the lane source), in any order.
struct Reads {
  std::mutex mu;
  std::vector<int64_t> ids;
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return ids.size();
  }
};

void attach(const DatasetPtr& ds, const std::string& label, std::vector<DatasetPtr>& nodes) {
  std::const_pointer_cast<Dataset>(ds)->attach(label, std::make_shared<NodeStats>(label, false));
  nodes.push_back(ds);
}

constexpr int64_t kPixels = 4096;

// "pixels": kPixels floats from id * 8 + echo on, made with Tensor::make (placed in its
// batch row where the merge fuses); "pixels_of": that first value.
void add_pixels(Example& e) {
  const int64_t first = e.id() * 8 + e.echo();
  e.set("pixels_of", Tensor::scalar<int64_t>(first));
  e.set("pixels", Tensor::make(DType::kFloat32, {kPixels}, [first](std::byte* bytes) {
          auto* f = reinterpret_cast<float*>(bytes);
          for (int64_t j = 0; j < kPixels; ++j) f[j] = static_cast<float>(first + j);
        }));
}

// The rows of `batch` whose pixels are not their own element's.
int64_t wrong_pixel_rows(const Example& batch) {
  const Tensor* pixels = batch.find("pixels");
  if (pixels == nullptr) return 0;
  int64_t wrong = 0;
  for (size_t i = 0; i < batch.num_rows(); ++i) {
    const int64_t first = batch.get("pixels_of").data<int64_t>()[i];
    const float* row = pixels->data<float>() + i * kPixels;
    for (int64_t j = 0; j < kPixels; ++j) {
      if (row[j] != static_cast<float>(first + j)) {
        ++wrong;
        break;
      }
    }
  }
  return wrong;
}

// Rank `rank` of `world` over range(records) in 4 shards, K = 6 lanes of 2 pieces:
// lane source -> [reads] -> [filter] -> [echo] -> [shuffle] -> noise map -> merge.
std::unique_ptr<Pipeline> rank_pipeline(const Variant& v, int64_t world, int64_t rank,
                                        std::shared_ptr<Reads> reads = nullptr) {
  std::vector<DatasetPtr> nodes;
  DatasetPtr source = make_range({v.records, 4});
  attach(source, "0:range", nodes);
  auto plan = std::make_shared<const ElasticPlan>(ElasticPlan::of(*source, kLanes, 2, 17));
  DatasetPtr ds = make_lane_source(source, plan);
  if (reads) {
    ds = make_map(ds, {.name = "count", .fn = [reads](Example e, const MapContext&) {
                         std::lock_guard<std::mutex> lock(reads->mu);
                         reads->ids.push_back(e.id());
                         return e;
                       }});
  }
  if (v.short_lane) ds = make_filter(ds, "short", [](const Example& e) { return e.id() >= 10; });
  if (v.example_echo > 1) ds = make_echo(ds, {.factor = v.example_echo, .seed = 5});
  if (v.shuffle > 0) ds = make_shuffle(ds, {.buffer = v.shuffle, .seed = 7});
  const bool pixels = v.pixels;
  ds = make_map(ds, {.name = "noise",
                     .fn =
                         [pixels](Example e, const MapContext& ctx) {
                           e.set("noise", Tensor::scalar<double>(ctx.rng_for(e).uniform01()));
                           if (pixels) add_pixels(e);
                           return e;
                         },
                     .parallelism = v.map_parallelism,
                     .seed = 11});
  attach(ds, "1:lane", nodes);
  ElasticBatchOptions o{.world_size = world,
                        .rank = rank,
                        .global_batch = v.global_batch,
                        .drop_remainder = v.drop_remainder,
                        .batch_echo = v.batch_echo,
                        .echo_seed = 3,
                        .prefetch = v.prefetch,
                        .place_rows = v.place_rows};
  DatasetPtr merge = make_elastic_batch(ds, plan, o);
  attach(merge, "2:elastic", nodes);
  return std::make_unique<Pipeline>(merge, nodes, "elastic-test:" + v.name);
}

std::vector<std::unique_ptr<Pipeline>> ranks_of(const Variant& v, int64_t world,
                                                std::shared_ptr<Reads> reads = nullptr) {
  std::vector<std::unique_ptr<Pipeline>> ranks;
  for (int64_t r = 0; r < world; ++r) ranks.push_back(rank_pipeline(v, world, r, reads));
  return ranks;
}

using Key = std::pair<int64_t, int32_t>;  // (id, echo index)

// What the ranks returned, call by call (one call of every rank is one step, or one copy
// of a step under batch echo).
struct Record {
  std::vector<std::vector<Key>> steps;          // each step's rows of all ranks, sorted
  std::vector<std::vector<int64_t>> rank_rows;  // rows per rank per step (0: none)
  std::map<Key, double> noise;                  // each row's augmentation
  int64_t wrong_pixels = 0;                     // rows with another element's pixels
  std::vector<Key> all() const {
    std::vector<Key> out;
    for (const auto& s : steps) out.insert(out.end(), s.begin(), s.end());
    std::sort(out.begin(), out.end());
    return out;
  }
  void append(const Record& more) {
    steps.insert(steps.end(), more.steps.begin(), more.steps.end());
    rank_rows.insert(rank_rows.end(), more.rank_rows.begin(), more.rank_rows.end());
    noise.insert(more.noise.begin(), more.noise.end());
    wrong_pixels += more.wrong_pixels;
  }
};

// Every rank's next batch, in lock step, `calls` times or until every rank has ended.
Record run(std::vector<std::unique_ptr<Pipeline>>& ranks, int64_t calls = -1) {
  Record out;
  for (int64_t c = 0; calls < 0 || c < calls; ++c) {
    std::vector<Key> step;
    std::vector<int64_t> rows;
    for (auto& p : ranks) {
      std::optional<Example> b = p->next();
      rows.push_back(b ? static_cast<int64_t>(b->num_rows()) : 0);
      if (!b) continue;
      out.wrong_pixels += wrong_pixel_rows(*b);
      const Tensor& noise = b->get("noise");
      for (size_t i = 0; i < b->num_rows(); ++i) {
        const Key key{b->row(i).id, b->row(i).echo};
        step.push_back(key);
        out.noise[key] = noise.data<double>()[i];
      }
    }
    if (step.empty()) break;
    std::sort(step.begin(), step.end());
    out.steps.push_back(std::move(step));
    out.rank_rows.push_back(std::move(rows));
  }
  return out;
}

Record uninterrupted(const Variant& v, int64_t world) {
  auto ranks = ranks_of(v, world);
  return run(ranks);
}

// Runs `before` calls on `from` ranks, saves every rank, merges the states and goes on to
// the end on `to` ranks restored from the merged state.
Record resumed(const Variant& v, int64_t from, int64_t to, int64_t before = 7) {
  auto first = ranks_of(v, from);
  Record out = run(first, before);
  std::vector<std::string> states;
  for (auto& p : first) states.push_back(p->save());
  first.clear();
  const std::string merged = merge_elastic_states(states);
  auto second = ranks_of(v, to);
  for (auto& p : second) p->restore(merged);
  out.append(run(second));
  return out;
}

TEST(ElasticOrder, EveryGlobalBatchIsTheSameForOneTwoThreeAndSixRanks) {
  for (const Variant& v : {kEchoBeforeAugment, kBatchEcho, kFractionalEcho}) {
    SCOPED_TRACE(v.name);
    const Record one = uninterrupted(v, 1);
    ASSERT_GE(one.steps.size(), 19u);
    for (int64_t n : {2, 3, 6}) {
      SCOPED_TRACE("ranks " + std::to_string(n));
      const Record many = uninterrupted(v, n);
      EXPECT_EQ(many.steps, one.steps);
      EXPECT_EQ(many.noise, one.noise);
    }
  }
}

TEST(ElasticOrder, EachRankGetsOneBatchPerStepWithItsShareOfRows) {
  Variant v{.name = "Batch14", .global_batch = 14, .records = 240};
  for (int64_t n : {1, 2, 3, 6}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    const Record r = uninterrupted(v, n);
    ASSERT_EQ(r.steps.size(), 18u);  // 17 full steps and 2 rows
    for (size_t s = 0; s < 17; ++s) {
      for (int64_t rank = 0; rank < n; ++rank) {
        int64_t mine = 0;  // positions i of [14s, 14s + 14) with i mod n == rank
        for (int64_t i = 14 * static_cast<int64_t>(s); i < 14 * static_cast<int64_t>(s + 1); ++i)
          mine += i % n == rank;
        EXPECT_EQ(r.rank_rows[s][static_cast<size_t>(rank)], mine) << "step " << s;
        EXPECT_LE(std::abs(r.rank_rows[s][static_cast<size_t>(rank)] * n - 14), n);
      }
    }
  }
}

TEST(ElasticOrder, ATailWithDropRemainderEndsAtTheSameStepForAnyWorldSize) {
  Variant v{.name = "DropTail", .drop_remainder = true, .short_lane = true};
  Variant keep = v;
  keep.drop_remainder = false;
  const Record one = uninterrupted(v, 1);
  const Record all = uninterrupted(keep, 1);
  // The short lane ends the run before the other lanes' elements are used up.
  ASSERT_GT(one.steps.size(), 3u);
  EXPECT_LT(one.steps.size(), all.steps.size());
  for (const auto& step : one.steps) EXPECT_EQ(step.size(), 12u);
  for (int64_t n : {2, 3, 6}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    const Record many = uninterrupted(v, n);
    // The trainer ends at the first step some rank has no batch.
    size_t full = 0;
    while (full < many.rank_rows.size() &&
           std::all_of(many.rank_rows[full].begin(), many.rank_rows[full].end(),
                       [](int64_t rows) { return rows > 0; }))
      ++full;
    EXPECT_EQ(full, one.steps.size());
    EXPECT_EQ(std::vector<std::vector<Key>>(many.steps.begin(), many.steps.begin() + full),
              one.steps);
  }
}

TEST(ElasticOrder, ATailWithoutDropRemainderKeepsEveryElement) {
  Variant v{.name = "KeepTail", .short_lane = true};
  const Record one = uninterrupted(v, 1);
  std::vector<Key> expected;
  for (int64_t id = 10; id < v.records; ++id) expected.push_back({id, 0});
  EXPECT_EQ(one.all(), expected);
  EXPECT_LT(one.steps.back().size(), 12u);  // the end batches shrink
  for (int64_t n : {2, 3, 6}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    EXPECT_EQ(uninterrupted(v, n).steps, one.steps);
  }
}

struct ResumeCase {
  int64_t from, to;
  Variant v;
};

void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << c.from << " to " << c.to << " ranks, " << c.v.name;
}

class ElasticResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(ElasticResume, NothingLostNothingTwice) {
  const ResumeCase& c = GetParam();
  const std::vector<Key> once = uninterrupted(c.v, 1).all();
  EXPECT_EQ(uninterrupted(c.v, c.from).all(), once);
  EXPECT_EQ(resumed(c.v, c.from, c.to).all(), once);
}

TEST_P(ElasticResume, StepsAfterTheResumeAreTheUninterruptedRunsSteps) {
  const ResumeCase& c = GetParam();
  EXPECT_EQ(resumed(c.v, c.from, c.to).steps, uninterrupted(c.v, 1).steps);
}

TEST_P(ElasticResume, EchoCopiesKeepTheirAugmentation) {
  const ResumeCase& c = GetParam();
  EXPECT_EQ(resumed(c.v, c.from, c.to).noise, uninterrupted(c.v, c.from).noise);
}

std::vector<ResumeCase> resume_cases() {
  std::vector<ResumeCase> cases;
  for (const Variant& v : {kEchoBeforeAugment, kBatchEcho, kFractionalEcho})
    for (auto [from, to] : {std::pair{2, 1}, {1, 2}, {2, 3}, {3, 2}})
      cases.push_back({from, to, v});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Worlds, ElasticResume, ::testing::ValuesIn(resume_cases()),
                         [](const ::testing::TestParamInfo<ResumeCase>& info) {
                           return std::to_string(info.param.from) + "to" +
                                  std::to_string(info.param.to) + "_" + info.param.v.name;
                         });

int64_t placed_rows(const std::vector<std::unique_ptr<Pipeline>>& ranks) {
  int64_t placed = 0;
  for (const auto& p : ranks) placed += p->nodes().back()->node_stats()->counter("placed_rows");
  return placed;
}

// Map-and-batch fusion across lanes: the lanes' maps compute their rows in the rank's
// batch, and every row holds its own element's pixels, with holes at a lane's end (rows
// after a hole move), batch echo, a parallel map and resumes on other world sizes.
TEST(ElasticFusion, RowsComputedInPlaceHoldTheirOwnElements) {
  Variant tail{.name = "PixelsTail", .short_lane = true, .pixels = true};
  Variant echo = kBatchEcho;
  echo.pixels = true;
  echo.map_parallelism = 3;
  echo.records = 960;  // the parallel maps run ahead of the first batch's column
  Variant before = kEchoBeforeAugment;
  before.pixels = true;
  for (const Variant& v : {tail, echo, before}) {
    SCOPED_TRACE(v.name);
    Variant copied = v;
    copied.place_rows = false;
    const Record one = uninterrupted(copied, 1);
    EXPECT_EQ(one.wrong_pixels, 0);
    for (int64_t n : {1, 2, 3}) {
      SCOPED_TRACE("ranks " + std::to_string(n));
      auto ranks = ranks_of(v, n);
      const Record fused = run(ranks);
      EXPECT_EQ(fused.steps, one.steps);
      EXPECT_EQ(fused.wrong_pixels, 0);
      // Rows are computed in place (how many depends on how far the lanes ran ahead of
      // the first batch, a matter of scheduling: the benchmark measures the rest).
      EXPECT_GT(placed_rows(ranks), 0);
    }
    for (auto [from, to] : {std::pair{2, 3}, {3, 2}, {1, 2}}) {
      SCOPED_TRACE(std::to_string(from) + " to " + std::to_string(to));
      for (int64_t calls : {1, 4, 9}) {
        const Record r = resumed(v, from, to, calls);
        EXPECT_EQ(r.steps, one.steps) << "saved after " << calls;
        EXPECT_EQ(r.wrong_pixels, 0) << "saved after " << calls;
      }
    }
  }
}

// Waits until the ranks' threads have read all they may read ahead (the count of reads
// has not moved for 300 ms).
void wait_until_still(Reads& reads) {
  size_t last = reads.size();
  for (int quiet = 0; quiet < 6;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const size_t now = reads.size();
    quiet = now == last ? quiet + 1 : 0;
    last = now;
  }
}

TEST(ElasticResumeBuffers, BufferedElementsAreCarriedNotReadAgain) {
  Variant v = kEchoBeforeAugment;
  v.shuffle = 6;
  v.prefetch = 3;
  auto before = std::make_shared<Reads>();
  auto first = ranks_of(v, 2, before);
  Record out = run(first, 5);
  wait_until_still(*before);
  std::vector<std::string> states;
  for (auto& p : first) states.push_back(p->save());
  // At the save, each rank had collated 3 batches ahead (the prefetch), besides what its
  // lanes' queues and shuffle buffers held.
  for (auto& p : first)
    EXPECT_EQ(p->nodes().back()->node_stats()->counter("collated").load(), 5 + 3);
  const size_t read_before = before->size();
  EXPECT_GT(read_before, 5u * 12 / 2 + 6 * 6);
  std::vector<int64_t> read_first = before->ids;
  first.clear();
  auto after = std::make_shared<Reads>();
  auto second = ranks_of(v, 3, after);
  const std::string merged = merge_elastic_states(states);
  for (auto& p : second) p->restore(merged);
  out.append(run(second));
  EXPECT_EQ(out.all(), uninterrupted(v, 1).all());
  // Each record read once over both parts: what was buffered at the save was carried.
  EXPECT_EQ(read_before + after->ids.size(), static_cast<size_t>(v.records));
  std::sort(read_first.begin(), read_first.end());
  for (int64_t id : after->ids)
    EXPECT_FALSE(std::binary_search(read_first.begin(), read_first.end(), id)) << id;
}

std::vector<std::string> saved_after(const Variant& v, int64_t world, int64_t calls) {
  auto ranks = ranks_of(v, world);
  run(ranks, calls);
  std::vector<std::string> states;
  for (auto& p : ranks) states.push_back(p->save());
  return states;
}

TEST(ElasticState, MergeUnitesRanksAndRefusesOverlapsGapsAndDifferentSteps) {
  const Variant& v = kEchoBeforeAugment;
  std::vector<std::string> three = saved_after(v, 3, 4);
  std::vector<std::string> two = saved_after(v, 2, 4);
  // Any order of the ranks' states merges.
  EXPECT_EQ(merge_elastic_states({three[2], three[0], three[1]}), merge_elastic_states(three));
  EXPECT_NE(error_of([&] {
              merge_elastic_states({two[0], three[0], three[1], three[2]});
            }).find("lane 0 is in the states of rank 0 of 2 and rank 0 of 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              merge_elastic_states({three[0], three[1]});
            }).find("lanes 2, 5 are missing"),
            std::string::npos);
  std::vector<std::string> later = saved_after(v, 3, 5);
  EXPECT_NE(error_of([&] {
              merge_elastic_states({three[0], later[1], three[2]});
            }).find("rank 1 of 3 was saved at step 5 (batch copy 0), rank 0 of 3 at 4"),
            std::string::npos);
  std::vector<std::string> other = saved_after(kFractionalEcho, 3, 4);
  EXPECT_NE(error_of([&] {
              merge_elastic_states({three[0], three[1], other[2]});
            })
                .find("come from different pipelines (rank 0 of 3 and rank 2 of 3): give every "
                      "rank the same seed"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_elastic_states({"not a state"}); }).find("state 0"),
            std::string::npos);
}

TEST(ElasticState, ARankStateRestoresAloneOnTheSameWorldSize) {
  const Variant& v = kBatchEcho;
  auto ranks = ranks_of(v, 2);
  run(ranks, 5);
  const std::string state = ranks[1]->save();
  std::vector<Example> rest = testing::drain(*ranks[1]);
  auto again = rank_pipeline(v, 2, 1);
  again->restore(state);
  std::vector<Example> resumed = testing::drain(*again);
  ASSERT_EQ(resumed.size(), rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(resumed[i].rows(), rest[i].rows()) << "batch " << i;
    EXPECT_EQ(resumed[i].get("value").data<int64_t>()[0], rest[i].get("value").data<int64_t>()[0]);
  }
}

TEST(ElasticState, ARankStateMissingLanesIsRefusedNamingThem) {
  const Variant& v = kEchoBeforeAugment;
  std::vector<std::string> three = saved_after(v, 3, 4);
  auto rank0of2 = rank_pipeline(v, 2, 0);
  EXPECT_NE(error_of([&] { rank0of2->restore(three[0]); })
                .find("the state holds lanes 0, 3 of 6; this rank (0 of 2) needs 0, 2, 4: "
                      "restore from merge_elastic_states"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              rank_pipeline(v, 4, 0);
            }).find("6 lanes do not split over 4 ranks: use 1, 2, 3 or 6"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho
