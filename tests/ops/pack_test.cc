#include "dataecho/ops/pack.h"

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "sequence_examples.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

TEST(Pack, FixedBlocksWithEosDocumentsAndIds) {
  auto elements = sequences({3, 5, 2});
  elements[1].set_echo(1);
  elements[2].stamp_epoch(3);
  PackOptions o{
      .length = 5, .epochs_field = "epochs", .echoes_field = "echoes", .eos_id = 99, .pad_id = -7};
  auto out = drain(*make_pack(make_memory_source(elements), o)->make_iterator({}));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(values_of(out[0].get("tokens")), (std::vector<int32_t>{0, 1, 2, 99, 100}));
  EXPECT_EQ(values_of(out[1].get("tokens")), (std::vector<int32_t>{101, 102, 103, 104, 99}));
  EXPECT_EQ(values_of(out[2].get("tokens")), (std::vector<int32_t>{200, 201, 99, -7, -7}));
  EXPECT_EQ(values_of(out[0].get("document")), (std::vector<int32_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(values_of(out[1].get("document")), (std::vector<int32_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(values_of(out[2].get("document")), (std::vector<int32_t>{0, 0, 0, -1, -1}));
  const Tensor& block_ids = out[0].get("ids");
  EXPECT_EQ(block_ids.dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(block_ids.data<int64_t>(), block_ids.data<int64_t>() + 2),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(out[1].get("ids").item<int64_t>(), 1);
  EXPECT_EQ(ids(out), (std::vector<int64_t>{0, 1, 2})) << "a block's id is its index";
  EXPECT_EQ(echoes(out), (std::vector<int32_t>{0, 1, 0})) << "every token of block 1 is a repeat";
  // Each sequence's read, whichever block its pieces are in: epochs and echo indices.
  EXPECT_EQ(values_of(out[0].get("echoes")), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(values_of(out[1].get("echoes")), (std::vector<int32_t>{1}));
  EXPECT_EQ(values_of(out[2].get("epochs")), (std::vector<int32_t>{3}));
  EXPECT_EQ(values_of(out[0].get("epochs")), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(out[0].find("label"), nullptr);

  o.drop_remainder = true;
  EXPECT_EQ(drain(*make_pack(make_memory_source(elements), o)->make_iterator({})).size(), 2u);
}

TEST(Pack, NoEosAddedTwiceAndNoneWithoutAnId) {
  auto elements = sequences({2, 0, 2});
  // Sequence 0 ends with 1: as eos, nothing is appended to it.
  auto out = drain(
      *make_pack(make_memory_source(elements), {.length = 4, .eos_id = 1})->make_iterator({}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values_of(out[0].get("tokens")), (std::vector<int32_t>{0, 1, 1, 200}));
  EXPECT_EQ(values_of(out[0].get("document")), (std::vector<int32_t>{0, 0, 1, 2}));
  out = drain(*make_pack(make_memory_source(elements), {.length = 4})->make_iterator({}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(values_of(out[0].get("tokens")), (std::vector<int32_t>{0, 1, 200, 201}));
}

TEST(Pack, RefusesWhatIsNotATokenSequence) {
  std::string msg = error_of([&] {
    drain(*make_pack(make_range({2}), {.length = 4, .field = "value"})->make_iterator({}));
  });
  EXPECT_NE(msg.find("int64 []"), std::string::npos) << msg;
  EXPECT_NE(msg.find("id 0"), std::string::npos) << msg;
  msg = error_of([&] { make_pack(make_range({2}), {.length = 0}); });
  EXPECT_NE(msg.find("length must be >= 1"), std::string::npos) << msg;
  msg = error_of([&] { make_pack(make_range({2}), {.length = 4, .epochs_field = "ids"}); });
  EXPECT_NE(msg.find("must be different, non-empty names"), std::string::npos) << msg;
}

TEST(Pack, SavedMidBlockContinuesIdentically) {
  auto def = [] {
    auto d = PipelineDef::from_dataset(make_memory_source(sequences({7, 1, 12, 3, 0, 5, 9, 2, 4})),
                                       "seqs");
    d.stage("pack", {{"length", 4}, {"eos_id", 999}});
    return d;
  };
  auto full = expect_restores_identically(def, {1, 4, 7, 10, 12});
  ASSERT_EQ(full.size(), 13u);  // 43 tokens + 9 eos (the empty sequence gets one too) = 52
  auto p = def().build();
  drain(*p);
  auto counters = p->stats().nodes().back()->counters();
  EXPECT_EQ(counters["sequences"], 9);
  EXPECT_EQ(counters["tokens"], 52);
  EXPECT_EQ(counters["pad_tokens"], 0);
}

}  // namespace
}  // namespace dataecho::testing
