// The `elastic` stage in the spec: PipelineDef::with_elastic_first, the state
// fingerprint without the world size and rank, node seeds that do not move with the
// world size, and the refusals of an elastic pipeline (each names the stage's path).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "dataecho/core/state.h"
#include "dataecho/ops/elastic.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;

// range(240) in 4 shards -> echo 2 -> shuffle 24 -> random_noise -> batch 12.
PipelineDef augmenting() {
  return range(240, {{"shards", 4}})
      .seed(9)
      .echo({.factor = 2})
      .shuffle({.buffer = 24})
      .map("random_noise")
      .batch({.size = 12});
}

std::string fingerprint_of(const std::string& state) {
  StateReader r(state);
  r.read_string();
  return r.read_string();
}

using Row = std::pair<int64_t, int32_t>;

// Each call's rows of all ranks (sorted), and each row's noise.
struct Rows {
  std::vector<std::vector<Row>> steps;
  std::map<Row, float> noise;
};

Rows run(std::vector<std::unique_ptr<Pipeline>>& ranks) {
  Rows out;
  while (true) {
    std::vector<Row> step;
    for (auto& p : ranks) {
      std::optional<Example> b = p->next();
      if (!b) continue;
      for (size_t i = 0; i < b->num_rows(); ++i) {
        const Row row{b->row(i).id, b->row(i).echo};
        step.push_back(row);
        out.noise[row] = b->get("noise").data<float>()[i];
      }
    }
    if (step.empty()) return out;
    std::sort(step.begin(), step.end());
    out.steps.push_back(std::move(step));
  }
}

std::vector<std::unique_ptr<Pipeline>> ranks_of(const PipelineDef& d, int64_t lanes,
                                                int64_t world) {
  std::vector<std::unique_ptr<Pipeline>> ranks;
  for (int64_t r = 0; r < world; ++r)
    ranks.push_back(d.with_elastic_first(lanes, world, r).build());
  return ranks;
}

TEST(ElasticSpec, FingerprintIgnoresWorldSizeAndRank) {
  const PipelineDef d = augmenting();
  auto one = d.with_elastic_first(6, 1, 0).build();
  auto other = d.with_elastic_first(6, 3, 2).build();
  auto fewer_lanes = d.with_elastic_first(3, 1, 0).build();
  EXPECT_EQ(fingerprint_of(one->save()), fingerprint_of(other->save()));
  EXPECT_NE(fingerprint_of(one->save()), fingerprint_of(fewer_lanes->save()));
  // A definition without the elastic stage fingerprints as before (the state fixtures of
  // StateCompat hold the rest).
  EXPECT_NE(fingerprint_of(d.build()->save()), fingerprint_of(one->save()));
  // States of two ranks, merged, restore on three (and on one).
  auto two = ranks_of(d, 6, 2);
  for (auto& p : two)
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(p->next());
  const std::string merged = merge_elastic_states({two[0]->save(), two[1]->save()});
  auto three = ranks_of(d, 6, 3);
  for (auto& p : three) p->restore(merged);
  one->restore(merged);
  EXPECT_TRUE(one->next());
  EXPECT_NE(error_of([&] { fewer_lanes->restore(merged); }).find("different pipeline spec"),
            std::string::npos);
  // A consumer of a rank (a DataLoader worker) fingerprints as the rank, restores the
  // merged state, and counts its lanes' rows in "__lanes__" (consumer 1 of 2 of the one
  // rank owns lanes 1, 3 and 5 of 6).
  auto worker = d.with_elastic_first(6, 1, 0)
                    .with_option(0, "consumers_per_rank", 2)
                    .with_option(0, "consumer", 1)
                    .with_option(0, "lane_counts", true)
                    .build();
  EXPECT_EQ(fingerprint_of(worker->save()), fingerprint_of(one->save()));
  worker->restore(merged);
  std::optional<Example> b = worker->next();
  ASSERT_TRUE(b);
  const Tensor& lanes = b->get("__lanes__");
  ASSERT_EQ(lanes.shape(), (Shape{3, 2}));
  EXPECT_EQ(lanes.data<int64_t>()[0], 1);
  EXPECT_EQ(lanes.data<int64_t>()[2], 3);
  EXPECT_EQ(lanes.data<int64_t>()[4], 5);
}

TEST(ElasticSpec, RoundTripsThroughJson) {
  const PipelineDef d = augmenting().with_elastic_first(12, 2, 1);
  const nlohmann::json j = d.to_json();
  EXPECT_EQ(j["stages"][0],
            nlohmann::json({{"op", "elastic"}, {"lanes", 12}, {"world_size", 2}, {"rank", 1}}));
  EXPECT_EQ(PipelineDef::from_json(j), d);
  EXPECT_EQ(PipelineDef::from_json(j).to_json(), j);
}

TEST(ElasticSpec, NodeSeedsDoNotDependOnWorldSize) {
  const PipelineDef d = augmenting();
  auto single = ranks_of(d, 6, 1);
  const Rows one = run(single);
  ASSERT_EQ(one.steps.size(), 40u);
  for (int64_t n : {2, 3, 6}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    auto ranks = ranks_of(d, 6, n);
    const Rows many = run(ranks);
    EXPECT_EQ(many.steps, one.steps);
    EXPECT_EQ(many.noise, one.noise);  // the same augmentation of every copy
  }
}

// The refusal of `d` with the elastic stage first (6 lanes, 2 ranks), which must name
// `path` and say `why`.
void expect_refused(const PipelineDef& d, const std::string& path, const std::string& why) {
  const std::string error = error_of([&] { d.with_elastic_first(6, 2, 0).build(); });
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find(why), std::string::npos) << error;
}

PipelineDef seeded() { return range(100).seed(1); }

TEST(ElasticRefusals, NoSeed) {
  expect_refused(range(100).batch({.size = 4}), "$.stages[0] (elastic)",
                 "needs the pipeline's \"seed\"");
}

TEST(ElasticRefusals, NotDeterministic) {
  expect_refused(seeded().deterministic(false).batch({.size = 4}), "$.stages[0] (elastic)",
                 "needs a deterministic pipeline");
  expect_refused(seeded().map("identity", {}, {.deterministic = false}).batch({.size = 4}),
                 "$.stages[1] (map)", "an unordered map makes a lane's order depend on timing");
}

TEST(ElasticRefusals, AdaptiveOrAutoEcho) {
  expect_refused(seeded().echo({.adaptive = true}).batch({.size = 4}), "$.stages[1] (echo)",
                 "repeats by timing");
  expect_refused(seeded().batch({.size = 4}).echo({.autotune = true}), "$.stages[2] (echo)",
                 "repeats by timing");
}

TEST(ElasticRefusals, CacheTakeSkipOrShardBeforeTheBatch) {
  expect_refused(seeded().take(10).batch({.size = 4}), "$.stages[1] (take)",
                 "counts or keeps elements per lane");
  expect_refused(seeded().cache().batch({.size = 4}), "$.stages[1] (cache)",
                 "counts or keeps elements per lane");
  EXPECT_NE(error_of([] {
              seeded().map("identity").stage("elastic").batch({.size = 4}).build();
            }).find("$.stages[1]: elastic must be the pipeline's first stage"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              seeded().stage("elastic").stage("elastic").batch({.size = 4}).build();
            }).find("$.stages[1] (elastic): must be the first stage, and only once"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              seeded().shard(2, 0).with_elastic_first(6, 2, 0);
            }).find("has a shard stage already"),
            std::string::npos);
}

TEST(ElasticRefusals, AStageAfterTheBatchOtherThanEchoAndPrefetch) {
  expect_refused(seeded().batch({.size = 4}).shuffle({.buffer = 4}), "$.stages[2] (shuffle)",
                 "after the batch an elastic pipeline takes only echo and prefetch");
}

TEST(ElasticRefusals, NoBatchOrABucket) {
  expect_refused(seeded().map("identity"), "$.stages[0] (elastic)", "needs a `batch` stage");
  expect_refused(seeded().map("identity").bucket({.boundaries = {4}, .batch_sizes = {2, 2}}),
                 "$.stages[2] (bucket)", "collates with `batch`");
}

TEST(ElasticRefusals, ACompressedSource) {
  const std::string gz = testing::write_gzip(testing::temp_dir() + "/lines.txt.gz", "a\nb\nc\n");
  expect_refused(text({gz}).seed(1).batch({.size = 2}), "$.stages[0] (elastic)", "compressed");
}

TEST(ElasticRefusals, AWorldSizeThatDoesNotDivideTheLanes) {
  const std::string error =
      error_of([] { seeded().batch({.size = 4}).with_elastic_first(12, 5, 0).build(); });
  EXPECT_NE(error.find("$.stages[0] (elastic)"), std::string::npos) << error;
  EXPECT_NE(error.find("12 lanes do not split over 5 ranks: use 1, 2, 3, 4, 6 or 12"),
            std::string::npos)
      << error;
  EXPECT_NE(error_of([] {
              seeded().batch({.size = 4}).with_elastic_first(6, 2, 3).build();
            }).find("rank 3 is not one of the 2 ranks (0 to 1)"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho
