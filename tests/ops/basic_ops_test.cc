// take, skip, repeat, filter, shard.
#include <gtest/gtest.h>

#include "dataecho/ops/basic.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::vector<int64_t> run_ids(const DatasetPtr& ds) {
  auto it = ds->make_iterator({});
  return ids(drain(*it));
}

TEST(Take, FirstCount) {
  EXPECT_EQ(run_ids(make_take(make_range({10}), 3)), iota(3));
  EXPECT_EQ(run_ids(make_take(make_range({2}), 5)), iota(2));
  EXPECT_EQ(run_ids(make_take(make_range({5}), 0)), iota(0));
}

TEST(Skip, AllButFirstCount) {
  EXPECT_EQ(run_ids(make_skip(make_range({10}), 7)), iota(3, 7));
  EXPECT_EQ(run_ids(make_skip(make_range({3}), 5)), iota(0));
}

TEST(Repeat, CountAndForever) {
  auto ids3 = run_ids(make_repeat(make_range({4}), 3));
  EXPECT_EQ(ids3.size(), 12u);
  EXPECT_EQ(std::vector<int64_t>(ids3.begin() + 8, ids3.end()), iota(4));
  EXPECT_EQ(run_ids(make_take(make_repeat(make_range({3}), -1), 10)),
            (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(run_ids(make_repeat(make_range({3}), 0)), iota(0));
}

TEST(Repeat, ForeverOverEmptyInputEnds) {
  EXPECT_EQ(run_ids(make_repeat(make_range({0}), -1)), iota(0));
}

TEST(Filter, KeepsMatching) {
  auto out = run_ids(
      make_filter(make_range({10}), "even", [](const Example& e) { return e.id() % 2 == 0; }));
  EXPECT_EQ(out, (std::vector<int64_t>{0, 2, 4, 6, 8}));
}

TEST(Filter, PredicateErrorNamesTheElement) {
  auto ds = make_filter(make_range({10}), "boom", [](const Example& e) -> bool {
    if (e.id() == 4) throw std::runtime_error("bad value");
    return true;
  });
  auto it = ds->make_iterator({});
  std::string msg = error_of([&] { drain(*it); });
  EXPECT_NE(msg.find("bad value"), std::string::npos) << msg;
  EXPECT_NE(msg.find("id 4"), std::string::npos) << msg;
}

TEST(Shard, ElementLevel) {
  EXPECT_EQ(run_ids(make_shard(make_range({10}), 3, 1)), (std::vector<int64_t>{1, 4, 7}));
  // Every element lands in exactly one shard.
  std::vector<int64_t> all;
  for (int i = 0; i < 4; ++i) {
    auto part = run_ids(make_shard(make_range({10}), 4, i));
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, iota(10));
}

TEST(Shard, FileLevelAfterAShardedSource) {
  auto ds = make_shard(make_range({12, 4}), 2, 1);  // shards {0-2} {3-5} {6-8} {9-11}
  EXPECT_EQ(ds->shards().size(), 2u);
  EXPECT_EQ(run_ids(ds), (std::vector<int64_t>{3, 4, 5, 9, 10, 11}));
}

TEST(Shard, RejectsBadIndex) {
  EXPECT_THROW(make_shard(make_range({10}), 2, 2), Error);
  EXPECT_THROW(make_shard(make_range({10}), 0, 0), Error);
}

}  // namespace
}  // namespace dataecho::testing
