#include "dataecho/ops/bucket.h"

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "sequence_examples.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

const std::vector<int64_t> kLengths = {1, 7, 4, 2, 9, 5, 3, 8, 0, 6, 2};

TEST(Bucket, BatchSizesPerBucketAndPartialBatchesAtTheEnd) {
  BucketOptions o{.boundaries = {3, 6}, .batch_sizes = {2, 2, 3}};
  auto out = drain(*make_bucket(make_memory_source(sequences(kLengths)), o)->make_iterator({}));
  // Buckets: < 3: ids 0 3 8 10; 3..5: ids 2 5 6; >= 6: ids 1 4 7 9.
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(ids(out), (std::vector<int64_t>{0, 3, 2, 5, 1, 4, 7, 8, 10, 6, 9}));
  EXPECT_EQ(out[2].get("tokens").shape(), (Shape{3, 9}));
  EXPECT_EQ(values_of(out[0].get("tokens"), 1), (std::vector<int32_t>{300, 301}));
  EXPECT_EQ(values_of(out[3].get("tokens_length")), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(out[5].num_rows(), 1u);
  o.drop_remainder = true;
  out = drain(*make_bucket(make_memory_source(sequences(kLengths)), o)->make_iterator({}));
  EXPECT_EQ(ids(out), (std::vector<int64_t>{0, 3, 2, 5, 1, 4, 7, 8, 10}));
}

TEST(Bucket, TokenBudget) {
  BucketOptions o{.boundaries = {5}, .token_budget = 12};
  auto out = drain(*make_bucket(make_memory_source(sequences(kLengths)), o)->make_iterator({}));
  for (const Example& b : out) {
    const Shape& s = b.get("tokens").shape();
    EXPECT_TRUE(s[0] * s[1] <= 12 || s[0] == 1) << shape_to_string(s);
  }
  // < 5: 1 4 2 3 0 2 (lengths); >= 5: 7 9 5 8 6.
  EXPECT_EQ(ids(out), (std::vector<int64_t>{0, 2, 3, 1, 4, 5, 7, 6, 8, 10, 9}));
}

TEST(Bucket, OptionErrors) {
  auto in = make_range({3});
  std::string msg = error_of([&] {
    make_bucket(in, {.boundaries = {3, 2}, .batch_sizes = {1, 1, 1}});
  });
  EXPECT_NE(msg.find("increasing"), std::string::npos) << msg;
  msg = error_of([&] { make_bucket(in, {.boundaries = {3}, .batch_sizes = {1}}); });
  EXPECT_NE(msg.find("2 buckets"), std::string::npos) << msg;
  msg = error_of([&] {
    run(R"({"source": {"kind": "range", "count": 3},
            "stages": [{"op": "bucket", "field": "value", "batch_sizes": [2]}]})");
  });
  EXPECT_NE(msg.find("(a first dimension)"), std::string::npos) << msg;
}

TEST(Bucket, SavedMidBucketContinuesIdentically) {
  auto def = [] {
    auto d = PipelineDef::from_dataset(make_memory_source(sequences(kLengths)), "seqs");
    d.stage("bucket", {{"boundaries", {3, 6}},
                       {"batch_sizes", {2, 2, 3}},
                       {"fields", {{"tokens", {{"multiple", 4}, {"value", -1}}}}}});
    return d;
  };
  auto full = expect_restores_identically(def, {1, 2, 3, 4, 5});
  ASSERT_EQ(full.size(), 6u);
  EXPECT_EQ(full[2].get("tokens").shape(), (Shape{3, 12}));
}

}  // namespace
}  // namespace dataecho::testing
