#include <gtest/gtest.h>

#include "dataecho/ops/basic.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

TEST(Range, YieldsIdsWithValueField) {
  auto it = make_range({5, 1})->make_iterator({});
  auto out = drain(*it);
  EXPECT_EQ(ids(out), iota(5));
  EXPECT_EQ(values(out), iota(5));
  EXPECT_EQ(out[3].get("value").dtype(), DType::kInt64);
  EXPECT_EQ(out[3].get("value").rank(), 0u);
  EXPECT_EQ(echoes(out), std::vector<int32_t>(5, 0));
}

TEST(Range, ShardsPartitionTheRangeInOrder) {
  auto ds = make_range({10, 3});
  auto shards = ds->shards();
  ASSERT_EQ(shards.size(), 3u);
  std::vector<int64_t> all;
  for (auto& s : shards) {
    auto it = s->make_iterator({});
    auto part = ids(drain(*it));
    EXPECT_FALSE(part.empty());
    all.insert(all.end(), part.begin(), part.end());
  }
  EXPECT_EQ(all, iota(10));
  auto it = ds->make_iterator({});
  EXPECT_EQ(ids(drain(*it)), iota(10));
}

TEST(Range, RejectsBadOptions) {
  EXPECT_THROW(make_range({-1, 1}), Error);
  EXPECT_THROW(make_range({10, 0}), Error);
}

TEST(MemorySource, YieldsTheGivenExamples) {
  std::vector<Example> ex(3);
  for (int i = 0; i < 3; ++i) ex[i].set("x", Tensor::scalar<float>(i * 1.5f));
  auto it = make_memory_source(ex)->make_iterator({});
  auto out = drain(*it);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FLOAT_EQ(out[2].get("x").item<float>(), 3.0f);
  EXPECT_EQ(ids(out), iota(3));
}

}  // namespace
}  // namespace dataecho::testing
