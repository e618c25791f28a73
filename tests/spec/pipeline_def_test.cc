// PipelineDef: the fluent builder builds what the same JSON spec builds; JSON round trips
// exactly for every op and every spec the project ships; errors of a definition made in
// C++ name the JSON path; state saved by a pipeline built from JSON restores into one
// built from the definition; the edits the experiment runner makes; functions of one's
// own, registered from C++ (through the single API header).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "dataecho/core/rng.h"
#include "dataecho/dataecho.h"
#include "test_util.h"

namespace dataecho {
namespace {

using nlohmann::json;

std::vector<std::string> as_json(Pipeline& p, int64_t limit = -1) {
  std::vector<std::string> out;
  for (const auto& e : testing::drain(p, limit)) out.push_back(example_to_json(e, true).dump());
  return out;
}

const char* kEveryOp = R"({
  "name": "every op", "comment": "one of each", "seed": 7, "deterministic": true,
  "source": {"kind": "range", "count": 40, "shards": 4},
  "stages": [
    {"op": "interleave", "cycle": 2, "parallelism": 0},
    {"op": "shard", "num_shards": 2, "index": 1},
    {"op": "repeat", "count": 2},
    {"op": "skip", "count": 1},
    {"op": "take", "count": 30},
    {"op": "filter", "fn": "even"},
    {"op": "map", "fn": "square", "parallelism": 2},
    {"op": "echo", "factor": 2.5},
    {"op": "shuffle", "buffer": 8, "seed": 3},
    {"op": "echo", "factor": "adaptive", "max_factor": 3, "buffer": 16, "buffer_bytes": 65536},
    {"op": "batch", "size": 4, "drop_remainder": true},
    {"op": "prefetch", "buffer": 2}
  ]})";

TEST(PipelineDef, RoundTripsEveryOpExactly) {
  json spec = json::parse(kEveryOp);
  PipelineDef d = PipelineDef::from_json(spec);
  EXPECT_EQ(d.to_json(), spec);
  EXPECT_EQ(PipelineDef::from_json(d.to_json()), d);
  EXPECT_EQ(d.stages().size(), 12u);
  EXPECT_EQ(d.seed(), 7u);
  // Without the optional fields, nothing is added on the way back.
  json bare = json::parse(R"({"source": {"kind": "range", "count": 3}})");
  EXPECT_EQ(PipelineDef::from_json(bare).to_json(), bare);
}

TEST(PipelineDef, RoundTripsEverySpecTheProjectShips) {
  int checked = 0;
  for (const char* dir : {"/examples", "/experiments", "/experiments/protocol"}) {
    for (const auto& f :
         std::filesystem::directory_iterator(std::string(DATAECHO_SOURCE_DIR) + dir)) {
      if (f.path().extension() != ".json") continue;
      std::ifstream in(f.path());
      json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("source")) continue;  // templates, configs
      SCOPED_TRACE(f.path().string());
      EXPECT_EQ(PipelineDef::from_json(j).to_json(), j);
      ++checked;
    }
  }
  EXPECT_GE(checked, 10);
}

TEST(PipelineDef, FluentBuilderBuildsWhatTheSameSpecBuilds) {
  PipelineDef d = range(50)
                      .seed(11)
                      .map("square", {}, {.parallelism = 2})
                      .echo({.factor = 2})
                      .shuffle({.buffer = 16})
                      .batch({.size = 8})
                      .prefetch(2);
  json spec = json::parse(R"({"seed": 11, "source": {"kind": "range", "count": 50}, "stages": [
      {"op": "map", "fn": "square", "parallelism": 2}, {"op": "echo", "factor": 2},
      {"op": "shuffle", "buffer": 16}, {"op": "batch", "size": 8}, {"op": "prefetch", "buffer": 2}]})");
  EXPECT_EQ(d.to_json(), spec);
  auto a = d.build();
  auto b = build_pipeline(spec);
  EXPECT_EQ(as_json(*a), as_json(*b));
  // Built from C++, the nodes are labelled and counted as from JSON.
  auto st = a->stats().to_json();
  EXPECT_EQ(st[2]["name"], "2:echo");
  EXPECT_EQ(st[2]["counters"]["fresh"], 50);
}

TEST(PipelineDef, AdaptiveEchoBuffersAreTypedOptions) {
  PipelineDef d =
      range(10).echo({.adaptive = true, .max_factor = 3, .buffer = 16, .buffer_bytes = 65536});
  EXPECT_EQ(d.to_json()["stages"][0], json::parse(R"({"op": "echo", "factor": "adaptive",
      "max_factor": 3, "buffer": 16, "buffer_bytes": 65536})"));
  std::vector<int64_t> fresh;
  auto p = d.build();
  while (auto e = p->next())
    if (e->echo() == 0) fresh.push_back(e->id());
  EXPECT_EQ(fresh, testing::iota(10));
  // Without them, the stage keeps the op's defaults and the JSON names neither.
  EXPECT_FALSE(range(10).echo({.adaptive = true}).to_json()["stages"][0].contains("buffer"));
  for (const char* field : {"buffer", "buffer_bytes"}) {
    EchoStageOptions o{.factor = 2};
    (std::string(field) == "buffer" ? o.buffer : o.buffer_bytes) = 4;
    EXPECT_NE(testing::error_of([&] { range(10).echo(o).build(); })
                  .find(std::string("$.stages[0].") + field +
                        ": only for \"factor\": \"adaptive\" or \"auto\""),
              std::string::npos)
        << field;
  }
  EXPECT_NE(testing::error_of([] {
              range(10).echo({.adaptive = true, .buffer_bytes = -1}).build();
            }).find("$.stages[0].buffer_bytes"),
            std::string::npos);
}

TEST(PipelineDef, ErrorsOfADefinitionMadeInCppNameTheJsonPath) {
  EXPECT_NE(testing::error_of([] {
              range(10).batch({.size = 0}).build();
            }).find("$.stages[0].size: expected an integer in [1, 16777216]"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              range(10).shuffle({.buffer = 4}).echo({.factor = 0.5}).build();
            }).find("$.stages[1]"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              range(10).stage("teleport").build();
            }).find("$.stages[0].op: unknown op \"teleport\""),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              PipelineDef("carrier_pigeon", {}).build();
            }).find("$.source.kind: unknown source kind"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              PipelineDef::from_json(json::parse(R"({"source": {"kind":
                "range", "count": 3}, "stages": {"op": "take"}})"));
            }).find("$.stages: expected a list of stages"),
            std::string::npos);
}

// The state fingerprint is the hash of the canonical JSON, as before PipelineDef: a state
// saved by a pipeline built from the spec restores into one built from the definition.
TEST(PipelineDef, StateSavedFromTheSpecRestoresIntoTheDefinition) {
  json spec = json::parse(R"({"seed": 3, "source": {"kind": "range", "count": 30},
      "stages": [{"op": "shuffle", "buffer": 10}, {"op": "batch", "size": 4}]})");
  auto full = as_json(*build_pipeline(spec));
  auto p = build_pipeline(spec);
  testing::drain(*p, 3);
  std::string state = p->save();
  auto q = range(30).seed(3).shuffle({.buffer = 10}).batch({.size = 4}).build();
  q->restore(state);
  EXPECT_EQ(as_json(*q), std::vector<std::string>(full.begin() + 3, full.end()));
  auto other = range(30).seed(4).shuffle({.buffer = 10}).batch({.size = 4}).build();
  EXPECT_FALSE(testing::error_of([&] { other->restore(state); }).empty());
}

// The edits the experiment runner makes: find a map by its function, insert an echo and
// a shuffle before it.
TEST(PipelineDef, FindAndInsertStages) {
  PipelineDef d = range(10).map("square").batch({.size = 2});
  auto at = d.find("map", "square");
  ASSERT_TRUE(at);
  EXPECT_EQ(*at, 0u);
  EXPECT_FALSE(d.find("map", "augment"));
  EXPECT_EQ(d.find("batch"), std::optional<size_t>(1));
  d.insert(*at, {{"echo", {{"factor", 2}}}, {"shuffle", {{"buffer", 4}}}});
  std::vector<std::string> ops;
  for (const auto& s : d.stages()) ops.push_back(s.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"echo", "shuffle", "map", "batch"}));
  EXPECT_EQ(testing::drain(*d.build()).size(), 10u);
}

// ---- the edits with value semantics (trainer, experiment runner, profile) ----

std::vector<std::string> ops(const PipelineDef& d) {
  std::vector<std::string> out;
  for (const auto& s : d.stages()) out.push_back(s.op);
  return out;
}

using Ops = std::vector<std::string>;

// Each edit returns a new definition and leaves the original as it was; the edited one
// round-trips through JSON like any other.
TEST(PipelineDefEdits, LeaveTheOriginalAsItWasAndRoundTrip) {
  const PipelineDef d = range(20).seed(5).map("square").echo({.factor = 2}).batch({.size = 4});
  const PipelineDef before = d;
  const nlohmann::json spec = d.to_json();
  const std::vector<PipelineDef> edited = {
      d.with_shard_first(2, 1),
      d.with_mixed_seed({9}),
      d.without("echo"),
      d.replacing("echo", {{"shuffle", {{"buffer", 3}}}}),
      d.inserting(0, {{"take", {{"count", 8}}}}),
      d.inserting_after(2, {{"prefetch", {{"buffer", 2}}}}),
      d.with_option(2, "size", int64_t{8}),
  };
  EXPECT_EQ(d, before);
  EXPECT_EQ(d.to_json(), spec);
  for (const PipelineDef& e : edited) {
    EXPECT_NE(e, d);
    EXPECT_EQ(PipelineDef::from_json(e.to_json()), e) << e.to_json().dump();
    EXPECT_EQ(PipelineDef::from_json(e.to_json()).to_json(), e.to_json());
  }
}

// An unedited definition keeps its canonical spec and so its state fingerprint; an edit
// that changes nothing (removing an op it does not have) too.
TEST(PipelineDefEdits, AnUneditedDefinitionKeepsItsSpecAndFingerprint) {
  const nlohmann::json spec = json::parse(R"({"seed": 3, "source": {"kind": "range", "count": 30},
      "stages": [{"op": "shuffle", "buffer": 10}, {"op": "batch", "size": 4}]})");
  const PipelineDef d = PipelineDef::from_json(spec);
  EXPECT_EQ(d.to_json(), spec);
  EXPECT_EQ(d.without("echo").to_json(), spec);
  EXPECT_EQ(d.replacing("echo", {}).to_json(), spec);
  // The same fingerprint: a state saved by the spec's pipeline restores.
  auto p = build_pipeline(spec);
  testing::drain(*p, 2);
  auto q = d.without("echo").build();
  q->restore(p->save());
  EXPECT_EQ(as_json(*q), as_json(*p));
  // A definition that lists no stages keeps it so (a spec of a source alone).
  const nlohmann::json bare = json::parse(R"({"source": {"kind": "range", "count": 3}})");
  EXPECT_FALSE(PipelineDef::from_json(bare).lists_stages());
  EXPECT_EQ(PipelineDef::from_json(bare).without("echo").to_json(), bare);
  EXPECT_TRUE(d.lists_stages());
}

// The trainer's data-parallel edit: a shard first, as the spec a person would write, and
// refused (naming the stage) where the pipeline shards already.
TEST(PipelineDefEdits, ShardFirstForARank) {
  const PipelineDef d = range(10).map("square").batch({.size = 2});
  const PipelineDef r1 = d.with_shard_first(2, 1);
  EXPECT_EQ(ops(r1), (Ops{"shard", "map", "batch"}));
  EXPECT_EQ(r1.stages()[0].to_json(), json::parse(R"({"op":"shard","num_shards":2,"index":1})"));
  EXPECT_EQ(r1, range(10).shard(2, 1).map("square").batch({.size = 2}));
  // Ranks 0 and 1 read the two halves.
  const PipelineDef unbatched = range(10).map("square");
  EXPECT_EQ(testing::drain(*unbatched.with_shard_first(2, 0).build()).size(), 5u);
  EXPECT_EQ(testing::drain(*unbatched.with_shard_first(2, 1).build()).size(), 5u);
  const std::string err =
      testing::error_of([&] { range(10).map("square").shard(3, 0).with_shard_first(2, 1); });
  EXPECT_NE(err.find("$.stages[1] (shard)"), std::string::npos) << err;
  EXPECT_NE(err.find("sharded already"), std::string::npos) << err;
}

// The seed is mixed with each salt in turn (the run's seed, then a rank), as the trainer
// did on the JSON spec, and stays a valid spec seed.
TEST(PipelineDefEdits, MixedSeed) {
  const PipelineDef d = range(10).seed(3).shuffle({.buffer = 5});
  EXPECT_EQ(d.with_mixed_seed({7}).seed(), mix_seed(3, 7) >> 1);
  EXPECT_EQ(d.with_mixed_seed({7, 2}).seed(), mix_seed(mix_seed(3, 7), 2) >> 1);
  EXPECT_EQ(range(10).with_mixed_seed({7}).seed(), mix_seed(0, 7) >> 1);  // unset: 0
  EXPECT_EQ(d.with_mixed_seed({}).seed(), 3u >> 1);
  const PipelineDef m = d.with_mixed_seed({~0ull, 1});
  EXPECT_LT(m.seed(), 1ull << 63);
  EXPECT_EQ(PipelineDef::from_json(m.to_json()), m);  // a seed the spec reader accepts
  EXPECT_NE(as_json(*m.build()), as_json(*d.build()));
}

TEST(PipelineDefEdits, RemoveReplaceAndInsert) {
  const PipelineDef d =
      range(10).echo({.factor = 2}).map("square").echo({.factor = 3}).batch({.size = 2});
  EXPECT_EQ(d.count("echo"), 2u);
  EXPECT_EQ(d.count("shard"), 0u);
  EXPECT_EQ(ops(d.without("echo")), (Ops{"map", "batch"}));
  EXPECT_EQ(ops(d.without("take")), ops(d));
  const PipelineDef r = d.replacing("echo", {{"take", {{"count", 9}}}, {"skip", {{"count", 1}}}});
  EXPECT_EQ(ops(r), (Ops{"take", "skip", "map", "take", "skip", "batch"}));
  EXPECT_EQ(ops(d.inserting(0, {{"take", {{"count", 4}}}})),
            (Ops{"take", "echo", "map", "echo", "batch"}));
  EXPECT_EQ(ops(d.inserting(4, {{"prefetch", {{"buffer", 2}}}})),
            (Ops{"echo", "map", "echo", "batch", "prefetch"}));
  EXPECT_EQ(ops(d.inserting_after(1, {{"shuffle", {{"buffer", 4}}}})),
            (Ops{"echo", "map", "shuffle", "echo", "batch"}));
  EXPECT_EQ(ops(d.inserting_after(3, {{"prefetch", {{"buffer", 2}}}})),
            (Ops{"echo", "map", "echo", "batch", "prefetch"}));
  EXPECT_EQ(testing::drain(*d.without("echo").build()).size(), 5u);
  // Edits that cannot apply name the place.
  std::string err = testing::error_of([&] { d.inserting(5, {{"take", {{"count", 1}}}}); });
  EXPECT_NE(err.find("$.stages[5]"), std::string::npos) << err;
  EXPECT_NE(err.find("has 4 stages"), std::string::npos) << err;
  err = testing::error_of([&] { d.inserting_after(4, {}); });
  EXPECT_NE(err.find("$.stages[4]: no such stage"), std::string::npos) << err;
}

TEST(PipelineDefEdits, OptionsAsTypedValues) {
  const PipelineDef d = range(10)
                            .map("square", {}, {.parallelism = kAutotune})
                            .map("square", {}, {.parallelism = 3})
                            .echo({.factor = 2.5})
                            .batch({.size = 4, .drop_remainder = true});
  EXPECT_EQ(d.option<int64_t>(0, "parallelism"), std::nullopt);  // "auto"
  EXPECT_EQ(d.option<std::string>(0, "parallelism"), "auto");
  EXPECT_EQ(d.option<int64_t>(1, "parallelism"), 3);
  EXPECT_EQ(d.option<std::string>(1, "fn"), "square");
  EXPECT_EQ(d.option<double>(2, "factor"), 2.5);
  EXPECT_EQ(d.option<int64_t>(2, "factor"), std::nullopt);
  EXPECT_EQ(d.option<int64_t>(3, "size"), 4);
  EXPECT_EQ(d.option<double>(3, "size"), 4.0);
  EXPECT_EQ(d.option<bool>(3, "drop_remainder"), true);
  EXPECT_EQ(d.option<int64_t>(3, "buffer"), std::nullopt);  // not given
  const std::string err = testing::error_of([&] { d.option<int64_t>(4, "size"); });
  EXPECT_NE(err.find("$.stages[4]: no such stage: the pipeline has 4 stages"), std::string::npos)
      << err;

  // Setting one: the batch size of an experiment's cell; build() validates it.
  const PipelineDef big = d.with_option(3, "size", int64_t{8});
  EXPECT_EQ(big.option<int64_t>(3, "size"), 8);
  EXPECT_EQ(big.option<bool>(3, "drop_remainder"), true);
  EXPECT_EQ(d.option<int64_t>(3, "size"), 4);
  const std::string bad = testing::error_of([&] { d.with_option(3, "size", -1).build(); });
  EXPECT_NE(bad.find("$.stages[3].size"), std::string::npos) << bad;
  const std::string op = testing::error_of([&] { d.with_option(3, "op", std::string("take")); });
  EXPECT_NE(op.find("$.stages[3] (batch)"), std::string::npos) << op;
}

// A list of stages alone (the in-memory pipelines' form) is read as a spec's.
TEST(PipelineDefEdits, StagesFromJson) {
  const auto stages = PipelineDef::stages_from_json(
      json::parse(R"([{"op":"batch","size":4},{"op":"prefetch","buffer":2}])"));
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0], (StageDef{"batch", {{"size", 4}}}));
  EXPECT_NE(testing::error_of([] {
              PipelineDef::stages_from_json(json::object());
            }).find("$.stages: expected a list of stages"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              PipelineDef::stages_from_json(json::parse(R"([{"op":"batch"},{"size":4}])"));
            }).find("$.stages[1]"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho

namespace dataecho {
namespace {

// A function registered from C++ works from the fluent builder and from a JSON spec, its
// arguments are validated by what it reads, and a name cannot be taken twice.
TEST(Registry, UserFunctionsWorkFromCppAndJsonWithTheirArgumentsChecked) {
  register_map_function("test_add",
                        [](SpecObject& args) -> MapFn {
                          const int64_t n = args.get_int("n", std::nullopt, 0, 100);
                          return [n](Example e, const MapContext&) {
                            e.set("value",
                                  Tensor::scalar<int64_t>(e.get("value").item<int64_t>() + n));
                            return e;
                          };
                        },
                        {.augmentation = true, .decodes = false});
  register_filter("test_below", [](SpecObject& args) -> Predicate {
    const int64_t limit = args.get_int("limit");
    return [limit](const Example& e) { return e.id() < limit; };
  });
  EXPECT_TRUE(registry().traits_of("test_add").augmentation);
  auto values = [](Pipeline& p) {
    std::vector<int64_t> v;
    for (const auto& e : testing::drain(p)) v.push_back(e.get("value").item<int64_t>());
    return v;
  };
  auto a = range(5).filter("test_below", {{"limit", 3}}).map("test_add", {{"n", 10}}).build();
  EXPECT_EQ(values(*a), (std::vector<int64_t>{10, 11, 12}));
  auto b = build_pipeline(json::parse(R"({"source": {"kind": "range", "count": 5}, "stages": [
      {"op": "filter", "fn": "test_below", "args": {"limit": 3}},
      {"op": "map", "fn": "test_add", "args": {"n": 10}}]})"));
  EXPECT_EQ(values(*b), (std::vector<int64_t>{10, 11, 12}));
  EXPECT_NE(testing::error_of([] {
              range(5).map("test_add", {{"n", 1000}}).build();
            }).find("$.stages[0].args.n"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { range(5).map("test_add").build(); }).find("$.stages[0].args.n"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              register_map_function("augment", [](SpecObject&) -> MapFn { return {}; });
            }).find("\"augment\" is registered already"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho
