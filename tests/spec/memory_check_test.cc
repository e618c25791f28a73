// The memory check of a pipeline's buffers (core/memory_watch.h, the spec's
// "memory_check"): a stage that would hold more than the limit is named with its
// estimate, at build time where the spec fixes the elements' size and else on the first
// elements; a warning by default, an error or nothing on request.
#include <gtest/gtest.h>

#include "dataecho/core/memory_watch.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

// Batches of 1,000 int64 (8 KB each) into a shuffle of 100: 800 KB, over 0.5 MiB.
std::string batches_into_a_shuffle(const std::string& action) {
  return R"({"memory_check": {"limit_mb": 0.5, "action": ")" + action +
         R"("}, "source": {"kind": "range", "count": 100000},
            "stages": [{"op": "batch", "size": 1000}, {"op": "shuffle", "buffer": 100}]})";
}

TEST(MemoryCheck, AnErrorNamesTheStageAndItsEstimateFromTheFirstElements) {
  auto p = build(batches_into_a_shuffle("error"));
  const std::string e = error_of([&] { drain(*p); });
  EXPECT_CONTAINS(e, "2:shuffle");
  EXPECT_CONTAINS(e, "its buffer of 100 elements of about 8.0 KB each (measured on the first 8)");
  EXPECT_CONTAINS(e, "about 800 KB, over the memory_check limit of 524 KB");
  EXPECT_CONTAINS(e, "put a shuffle before decoding");
}

TEST(MemoryCheck, AWarningOnceAndTheElementsAllCome) {
  auto p = build(batches_into_a_shuffle("warn"));
  ::testing::internal::CaptureStderr();
  const auto out = drain(*p);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.size(), 100u);
  EXPECT_CONTAINS(err, "dataecho: warning: 2:shuffle: its buffer of 100 elements");
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;
}

TEST(MemoryCheck, OffSaysNothingAndWithinTheLimitSaysNothing) {
  for (const std::string& spec :
       {batches_into_a_shuffle("off"), std::string(R"({"source": {"kind": "range", "count": 100000},
           "stages": [{"op": "batch", "size": 1000}, {"op": "shuffle", "buffer": 100}]})")}) {
    auto p = build(spec);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(drain(*p).size(), 100u);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  }
}

// decode_augment's or augment's crop fixes the size of what follows: a shuffle of 100
// crops of 224 x 224 floats (201 KB each, one channel at least) is refused when the
// pipeline is built, before anything is read; the map's own buffer (17 of them) fits.
TEST(MemoryCheck, AtBuildTimeWhereTheSpecFixesTheSize) {
  const std::string e = error_of([] {
    build(R"({"memory_check": {"limit_mb": 5, "action": "error"},
              "source": {"kind": "range", "count": 10},
              "stages": [{"op": "map", "fn": "augment", "args": {"random_resized_crop": 224, "normalize": true}},
                         {"op": "shuffle", "buffer": 100}]})");
  });
  EXPECT_CONTAINS(e,
                  "2:shuffle: its buffer of 100 elements of about 201 KB each (augment's "
                  "random_resized_crop, float32, at least one channel) come to about 20.1 MB");
  // A batch after the crop multiplies it: 4 batches of 64 crops held by a prefetch.
  const std::string b = error_of([] {
    build(R"({"memory_check": {"limit_mb": 40, "action": "error"},
              "source": {"kind": "range", "count": 10},
              "stages": [{"op": "map", "fn": "augment", "args": {"random_resized_crop": [224, 224], "normalize": true}},
                         {"op": "batch", "size": 64}, {"op": "prefetch", "buffer": 4}]})");
  });
  EXPECT_CONTAINS(b, "3:prefetch: its buffer of 4 elements of about 12.8 MB each");
  EXPECT_CONTAINS(b, "a batch of 64");
}

// The check changes nothing the pipeline produces: a state saved with it restores without
// it, and the spec writes it back.
TEST(MemoryCheck, IsNotPartOfWhatThePipelineProduces) {
  const std::string with = R"({"memory_check": {"share": 0.5, "action": "off"},
      "source": {"kind": "range", "count": 20}, "stages": [{"op": "shuffle", "buffer": 5}]})";
  const std::string without =
      R"({"source": {"kind": "range", "count": 20}, "stages": [{"op": "shuffle", "buffer": 5}]})";
  auto a = build(with);
  drain(*a, 7);
  auto b = build(without);
  b->restore(a->save());
  EXPECT_EQ(values(drain(*b)), values(drain(*a)));
  const PipelineDef d = PipelineDef::from_json(nlohmann::json::parse(with));
  EXPECT_EQ(d.to_json()["memory_check"],
            nlohmann::json::parse(R"({"share": 0.5, "action": "off"})"));
  EXPECT_CONTAINS(
      error_of([] {
        build(R"({"memory_check": {"action": "loud"}, "source": {"kind": "range", "count": 2}})");
      }),
      "$.memory_check.action");
}

TEST(MemoryCheck, TheBuilderAndTheSpecRefuseABadOptionWithOneMessage) {
  // The C++ builder's options go through the declaration that reads the spec's.
  const auto from_spec = [](const std::string& mc) {
    return error_of([&] {
      PipelineDef::from_json(nlohmann::json::parse(
          R"({"memory_check": )" + mc + R"(, "source": {"kind": "range", "count": 2}})"));
    });
  };
  const std::string action = error_of([] { range(2).memory_check({.action = "loud"}); });
  EXPECT_EQ(action, from_spec(R"({"action": "loud"})"));
  EXPECT_CONTAINS(action, R"($.memory_check.action: expected one of "warn", "error" or "off")");
  const std::string share = error_of([] { range(2).memory_check({.share = 2}); });
  EXPECT_EQ(share, from_spec(R"({"share": 2.0})"));
  EXPECT_CONTAINS(share, "$.memory_check.share: expected a number in [1e-06, 1]");
  const std::string limit = error_of([] { range(2).memory_check({.limit_mb = 0}); });
  EXPECT_EQ(limit, from_spec(R"({"limit_mb": 0.0})"));
  EXPECT_CONTAINS(limit, "$.memory_check.limit_mb");
  EXPECT_EQ(range(2).memory_check({.share = 0.5, .action = "off"}).memory_check().action, "off");
}

}  // namespace
}  // namespace dataecho::testing
