#include "dataecho/ops/padded_batch.h"

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "dataecho/ops/batch.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/pipeline_def.h"
#include "sequence_examples.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

TEST(PaddedBatch, PadsToTheLongestAndAddsLengths) {
  auto ds = make_padded_batch(make_memory_source(sequences({2, 4, 1, 3, 2})), {.size = 2});
  auto out = drain(*ds->make_iterator({}));
  ASSERT_EQ(out.size(), 3u);
  const Tensor& t = out[0].get("tokens");
  EXPECT_EQ(t.shape(), (Shape{2, 4}));
  EXPECT_EQ(values_of(t, 0), (std::vector<int32_t>{0, 1, 0, 0}));
  EXPECT_EQ(values_of(t, 1), (std::vector<int32_t>{100, 101, 102, 103}));
  const Tensor& len = out[0].get("tokens_length");
  EXPECT_EQ(len.dtype(), DType::kInt32);
  EXPECT_EQ(len.data<int32_t>()[0], 2);
  EXPECT_EQ(len.data<int32_t>()[1], 4);
  EXPECT_EQ(out[1].get("tokens").shape(), (Shape{2, 3}));
  EXPECT_EQ(out[1].get("label").shape(), (Shape{2}));
  EXPECT_EQ(out[1].find("label_length"), nullptr) << "scalars are not padded";
  EXPECT_EQ(ids(out), iota(5));
}

TEST(PaddedBatch, FixedLengthMultipleAndPadValue) {
  PaddedBatchOptions o{.size = 3};
  o.pad.fields = {PadField{"tokens", PadField::To::kMultiple, 4, -1}};
  auto out =
      drain(*make_padded_batch(make_memory_source(sequences({5, 1, 2})), o)->make_iterator({}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].get("tokens").shape(), (Shape{3, 8}));
  EXPECT_EQ(values_of(out[0].get("tokens"), 1),
            (std::vector<int32_t>{100, -1, -1, -1, -1, -1, -1, -1}));

  o.pad.fields = {PadField{"tokens", PadField::To::kFixed, 3, 7}};
  std::string msg = error_of([&] {
    drain(*make_padded_batch(make_memory_source(sequences({5, 1})), o)->make_iterator({}));
  });
  EXPECT_NE(msg.find("'tokens'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("length 5"), std::string::npos) << msg;
  o.pad.fields[0].truncate = true;
  out = drain(*make_padded_batch(make_memory_source(sequences({5, 1})), o)->make_iterator({}));
  EXPECT_EQ(values_of(out[0].get("tokens"), 0), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(values_of(out[0].get("tokens"), 1), (std::vector<int32_t>{100, 7, 7}));
  EXPECT_EQ(out[0].get("tokens_length").data<int32_t>()[0], 3);
}

TEST(PaddedBatch, UnlistedFieldsMustMatchAndBatchSaysPaddedBatch) {
  PaddedBatchOptions o{.size = 2};
  o.pad.fields = {PadField{"label"}};
  std::string msg = error_of([&] {
    drain(*make_padded_batch(make_memory_source(sequences({2, 3})), o)->make_iterator({}));
  });
  EXPECT_NE(msg.find("padded field 'label' is a scalar"), std::string::npos) << msg;
  o.pad.fields = {PadField{"tokens", PadField::To::kLongest, 0, 0.5}};
  msg = error_of([&] {
    drain(*make_padded_batch(make_memory_source(sequences({2, 3})), o)->make_iterator({}));
  });
  EXPECT_NE(msg.find("the pad value 0.5 of field 'tokens' does not fit its dtype, int32"),
            std::string::npos)
      << msg;
  msg = error_of([&] {
    drain(*make_batch(make_memory_source(sequences({2, 3})), {2, false})->make_iterator({}));
  });
  EXPECT_NE(msg.find("padded_batch"), std::string::npos) << msg;
}

TEST(PaddedBatch, SpecErrorsNameTheOption) {
  auto spec_error = [](const std::string& stage) {
    return error_of(
        [&] { run(R"({"source": {"kind": "range", "count": 2}, "stages": [)" + stage + "]}"); });
  };
  std::string msg = spec_error(
      R"({"op": "padded_batch", "size": 2, "fields": {"v": {"length": 2, "multiple": 2}}})");
  EXPECT_NE(msg.find("$.stages[0].fields.v: give \"length\" or \"multiple\""), std::string::npos)
      << msg;
  msg = spec_error(R"({"op": "padded_batch", "size": 2, "fields": {"v": {"truncate": true}}})");
  EXPECT_NE(msg.find("$.stages[0].fields.v.truncate"), std::string::npos) << msg;
  msg = spec_error(R"({"op": "padded_batch", "size": 0})");
  EXPECT_NE(msg.find("$.stages[0].size"), std::string::npos) << msg;
  msg = spec_error(R"({"op": "bucket", "boundaries": [4], "batch_sizes": [2]})");
  EXPECT_NE(msg.find("$.stages[0].batch_sizes: expected 2 batch sizes"), std::string::npos) << msg;
  msg = spec_error(R"({"op": "pack", "length": 8, "unknown": 1})");
  EXPECT_NE(msg.find("$.stages[0].unknown"), std::string::npos) << msg;
}

TEST(Unbatch, CutsPaddingOffAndKeepsRowMetadata) {
  auto elements = sequences({2, 4, 0, 3, 1});
  for (size_t i = 0; i < elements.size(); ++i) elements[i].set_id(static_cast<int64_t>(i));
  elements[3].set_echo(2);
  elements[3].stamp_epoch(5);
  auto ds = make_unbatch(make_padded_batch(make_memory_source(elements), {.size = 2}));
  auto out = drain(*ds->make_iterator({}));
  ASSERT_EQ(out.size(), elements.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_FALSE(out[i].is_batch());
    EXPECT_EQ(example_to_json(out[i], true), example_to_json(elements[i], true)) << i;
    EXPECT_EQ(out[i].find("tokens_length"), nullptr);
  }
  EXPECT_EQ(out[3].row(0), (RowMeta{3, 2, 5}));
}

TEST(Unbatch, RefusesAnElementThatIsNoBatch) {
  std::string msg = error_of([&] { drain(*make_unbatch(make_range({3}))->make_iterator({})); });
  EXPECT_NE(msg.find("not a batch"), std::string::npos) << msg;
}

TEST(PaddedBatch, InTheBuilderSavesAndRestoresMidBatchStream) {
  auto def = [] {
    auto d =
        PipelineDef::from_dataset(make_memory_source(sequences({3, 1, 4, 1, 5, 9, 2, 6})), "seqs");
    d.padded_batch({.size = 3, .fields = {{"tokens", {{"multiple", 2}, {"value", -1}}}}})
        .unbatch()
        .padded_batch({.size = 2});
    return d;
  };
  auto full = expect_restores_identically(def, {1, 3});
  ASSERT_EQ(full.size(), 4u);
  EXPECT_EQ(full[0].get("tokens").shape(), (Shape{2, 3}))
      << "the padding of the first batch is cut off";
  auto p = def().build();
  drain(*p);
  auto counters = p->stats().nodes().back()->counters();
  EXPECT_EQ(counters["fresh_rows"], 8);
  EXPECT_EQ(counters["value_elements"], 31);
  EXPECT_EQ(counters["pad_elements"], 2 * (3 + 4 + 9 + 6) - 31);
}

}  // namespace
}  // namespace dataecho::testing
