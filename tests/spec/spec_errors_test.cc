// A wrong spec is refused before anything runs, with the JSON path and what was expected.
#include <gtest/gtest.h>

#include "dataecho/spec/build.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::string spec_error(const std::string& json) {
  return error_of([&] { build(json); });
}

void expect_contains(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

TEST(SpecErrors, UnknownOp) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "batch", "size": 2}, {"op": "shufle", "buffer": 3}]})"),
      {"$.stages[1].op", "unknown op \"shufle\"", "shuffle"});
}

// Every unknown name is refused with the names there are and, when it is a few edits
// from one of them, that one.
TEST(SpecErrors, DidYouMean) {
  const std::string range = R"({"source": {"kind": "range", "count": 3}, "stages": [)";
  expect_contains(spec_error(range + R"({"op": "shufle", "buffer": 3}]})"),
                  {"unknown op \"shufle\"; did you mean \"shuffle\"?", "(known: "});
  expect_contains(spec_error(R"({"source": {"kind": "tfrecrod", "uri": "x"}})"),
                  {"unknown source kind \"tfrecrod\"; did you mean \"tfrecord\"?"});
  expect_contains(spec_error(range + R"({"op": "map", "fn": "nromalize"}]})"),
                  {"unknown map function \"nromalize\"; did you mean \"normalize\"?"});
  expect_contains(spec_error(range + R"({"op": "batch", "size": 2, "drop_remaindr": true}]})"),
                  {"unknown field; did you mean \"drop_remainder\"?"});
  expect_contains(
      spec_error(range + R"({"op": "map", "fn": "augment", "args": {"flipp": true}}]})"),
      {"$.stages[0].args.flipp", "did you mean \"flip\"?"});
  // Nothing close: the list alone.
  const std::string far = spec_error(range + R"({"op": "zzzzzz"}]})");
  expect_contains(far, {"unknown op \"zzzzzz\" (known: "});
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

// A misspelt required option is named beside the missing one.
TEST(SpecErrors, AMissingOptionNamesItsMisspelling) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "shuffle", "bufer": 4}]})"),
      {"$.stages[0].buffer: missing", "this object has \"bufer\": a misspelling of \"buffer\"?"});
}

// The known fields include the optional ones a builder only looks for (shuffle's seed).
TEST(SpecErrors, KnownFieldsIncludeOptionalOnes) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "shuffle", "buffer": 4, "x": 1}]})"),
      {"$.stages[0].x", "unknown field", "seed", "buffer", "reshuffle_each_iteration"});
}

TEST(SpecErrors, WrongType) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "batch", "size": "big"}]})"),
      {"$.stages[0].size", "expected an integer", "string"});
}

TEST(SpecErrors, NegativeSize) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "shuffle", "buffer": -5}]})"),
      {"$.stages[0].buffer", "in [1, 1073741824]", "-5"});
}

// decode_image's and decode_augment's "fast_huffman" (DecodeOptions::fast_huffman) is a
// bool; false builds.
TEST(SpecErrors, FastHuffmanIsABool) {
  for (const char* fn : {"decode_image", "decode_augment"}) {
    const std::string stage = std::string(R"({"op": "map", "fn": ")") + fn + R"(", "args": {)";
    expect_contains(spec_error(R"({"source": {"kind": "range", "count": 3}, "stages": [)" + stage +
                               R"("fast_huffman": "no"}}]})"),
                    {"$.stages[0].args.fast_huffman", "expected true or false"});
    EXPECT_NO_THROW(build(R"({"source": {"kind": "range", "count": 3}, "stages": [)" + stage +
                          R"("fast_huffman": false}}]})"));
  }
}

TEST(SpecErrors, UnknownField) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "batch", "size": 2, "drop_remaindr": true}]})"),
      {"$.stages[0].drop_remaindr", "unknown field", "drop_remainder"});
  expect_contains(spec_error(R"({"source": {"kind": "range", "count": 3}, "sead": 3})"),
                  {"$.sead", "unknown field"});
  expect_contains(spec_error(R"({"source": {"kind": "range", "count": 3, "shard": 2}})"),
                  {"$.source.shard", "unknown field"});
}

TEST(SpecErrors, MissingPieces) {
  expect_contains(spec_error(R"({"stages": []})"), {"$.source", "missing"});
  expect_contains(spec_error(R"({"source": {"kind": "range"}})"), {"$.source.count", "missing"});
  expect_contains(spec_error(R"({"source": {"kind": "parquet"}})"),
                  {"$.source.kind", "unknown source kind \"parquet\"", "range"});
  expect_contains(
      spec_error(R"({"source": {"kind": "range", "count": 3}, "stages": [{"size": 2}]})"),
      {"$.stages[0].op", "missing"});
}

TEST(SpecErrors, StagesMustBeAList) {
  expect_contains(
      spec_error(R"({"source": {"kind": "range", "count": 3}, "stages": {"op": "batch"}})"),
      {"$.stages", "list"});
}

TEST(SpecErrors, UnknownFunctionAndBadArgs) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "map", "fn": "sqaure"}]})"),
      {"$.stages[0].fn", "unknown map function \"sqaure\"", "square"});
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "map", "fn": "sleep", "args": {"ms": -1}}]})"),
      {"$.stages[0].args.ms", "in [0, 1000000000]"});
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "map", "fn": "identity", "args": {"x": 1}}]})"),
      {"$.stages[0].args.x", "unknown field"});
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "map", "fn": "square", "parallelism": 0}]})"),
      {"$.stages[0].parallelism"});
}

TEST(SpecErrors, InterleaveWithoutShards) {
  expect_contains(
      spec_error(R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "interleave"}]})"),
      {"$.stages[0]", "shards"});
}

TEST(SpecErrors, ShardIndexOutOfRange) {
  expect_contains(
      spec_error(
          R"({"source": {"kind": "range", "count": 3}, "stages": [{"op": "shard", "num_shards": 2, "index": 2}]})"),
      {"$.stages[0].index", "[0, 1]"});
}

TEST(SpecErrors, NotJson) {
  std::string msg = error_of([] { parse_spec_text("{\"source\": ", "my.json"); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my.json"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dataecho::testing
