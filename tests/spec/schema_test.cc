// The operators' declarations (spec/schema.h): the getters read by them (defaults,
// bounds, the names an error lists), every built-in has one, and the C++ builder's typed
// options write exactly the options their op declares.
#include <set>

#include <gtest/gtest.h>

#include "dataecho/dataecho.h"
#include "dataecho/spec/registry.h"
#include "test_util.h"

namespace dataecho {
namespace {

using nlohmann::json;

std::set<std::string> declared(const OpSchema& s) {
  std::set<std::string> out;
  for (const OptionDecl& d : s.options) out.insert(d.name);
  return out;
}

std::set<std::string> written(const PipelineDef& d) {
  std::set<std::string> out;
  for (const auto& [key, value] : d.stages().back().options.items()) out.insert(key);
  return out;
}

TEST(Schema, TheTypedBuilderWritesExactlyTheDeclaredOptions) {
  // Each stage op with every typed option set (both modes where a mode decides which
  // apply); a stage added without an entry here fails the last check.
  std::map<std::string, std::vector<PipelineDef>> typed;
  auto with = [](auto edit) {
    PipelineDef d = range(4);
    edit(d);
    return d;
  };
  typed["map"] = {with([](PipelineDef& d) {
    d.map("identity", {{"x", 1}}, {.parallelism = 2, .deterministic = false, .buffer = 4});
  })};
  typed["filter"] = {with([](PipelineDef& d) { d.filter("id_mod", {{"mod", 2}}); })};
  typed["interleave"] = {with(
      [](PipelineDef& d) { d.interleave({.cycle = 2, .parallelism = 2, .buffer_per_shard = 3}); })};
  typed["shuffle"] = {with([](PipelineDef& d) {
    d.shuffle({.buffer = 4, .seed = 1, .reshuffle_each_iteration = false});
  })};
  typed["echo"] = {with([](PipelineDef& d) {
    d.echo({.adaptive = true, .max_factor = 3, .buffer = 8, .buffer_bytes = 0, .seed = 1});
  })};
  typed["batch"] = {with([](PipelineDef& d) { d.batch({.size = 2, .drop_remainder = true}); })};
  typed["padded_batch"] = {with([](PipelineDef& d) {
    d.padded_batch({.size = 2, .drop_remainder = true, .fields = json{"tokens"}, .lengths = false});
  })};
  typed["unbatch"] = {with([](PipelineDef& d) { d.unbatch(); })};
  typed["pack"] = {with([](PipelineDef& d) {
    d.pack({.length = 8,
            .eos_id = 1,
            .pad_id = 2,
            .drop_remainder = true,
            .reads = true,
            .field = "t",
            .document_field = "doc",
            .ids_field = "i"});
  })};
  typed["bucket"] = {with([](PipelineDef& d) {
    d.bucket({.boundaries = {4},
              .batch_sizes = {2, 2},
              .token_budget = 64,
              .field = "t",
              .drop_remainder = true,
              .fields = json{"t"},
              .lengths = false});
  })};
  typed["prefetch"] = {with([](PipelineDef& d) { d.prefetch(3); })};
  typed["cache"] = {with([](PipelineDef& d) {
    d.cache({.path = "c", .key = "k", .max_bytes = 1, .prefix = true, .allow_shuffled = true});
  })};
  typed["repeat"] = {with([](PipelineDef& d) { d.repeat(2); })};
  typed["take"] = {with([](PipelineDef& d) { d.take(2); })};
  typed["skip"] = {with([](PipelineDef& d) { d.skip(2); })};
  typed["shard"] = {with([](PipelineDef& d) { d.shard(2, 1); })};
  // The elastic stage is put first by with_elastic_first; its other options are written
  // as every declared stage's (the DataLoader's consumers by TorchIterable, through
  // with_option).
  typed["elastic"] = {with([](PipelineDef& d) { d = d.with_elastic_first(6, 2, 1); }),
                      with([](PipelineDef& d) {
                        d.declared_stage("elastic", {{"pieces_per_lane", 2},
                                                     {"seed", 3},
                                                     {"consumers_per_rank", 2},
                                                     {"consumer", 1},
                                                     {"lane_counts", true}});
                      })};

  const Registry& r = registry();
  for (const auto& [op, defs] : typed) {
    const OpSchema* schema = Registry::find(r.stage_schemas, op);
    ASSERT_NE(schema, nullptr) << op;
    std::set<std::string> all;
    for (const PipelineDef& d : defs) {
      for (const std::string& key : written(d)) {
        EXPECT_NE(schema->find(key), nullptr) << op << " writes \"" << key << "\", not declared";
        all.insert(key);
      }
    }
    EXPECT_EQ(all, declared(*schema)) << op << ": the typed options miss a declared one";
  }
  for (const auto& [op, schema] : r.stage_schemas)
    EXPECT_TRUE(typed.count(op)) << "stage " << op << " has no typed check here";
}

TEST(Schema, EveryBuiltInIsDeclared) {
  // The built-ins alone (other tests register extensions of their own without one).
  Registry r;
  for (auto add : {register_core_builders, register_builtin_functions, register_echo_builders,
                   register_format_builders, register_cache_builders, register_image_functions,
                   register_sequence_builders})
    add(r);
  for (const auto& [name, b] : r.sources) EXPECT_TRUE(r.source_schemas.count(name)) << name;
  for (const auto& [name, b] : r.stages) EXPECT_TRUE(r.stage_schemas.count(name)) << name;
  for (const auto& [name, b] : r.map_fns) EXPECT_TRUE(r.map_fn_schemas.count(name)) << name;
  for (const auto& [name, b] : r.predicates) EXPECT_TRUE(r.predicate_schemas.count(name)) << name;
  const json all = registry_schema();
  for (const char* group : {"sources", "stages", "map_functions", "filters"})
    EXPECT_FALSE(all[group].empty()) << group;
}

TEST(Schema, GettersTakeTheDeclaredDefaultsAndBounds) {
  const std::vector<OptionDecl> decls = {
      {.name = "n", .fallback = 7, .min = 1, .max = 9, .doc = "a count"},
      {.name = "mode", .type = OptionType::kString, .fallback = "a", .choices = {"a", "b"}}};
  const json empty = json::object();
  SpecObject s(empty, "$.x");
  s.declare(decls, "test");
  EXPECT_EQ(s.get_int("n"), 7);
  EXPECT_EQ(s.get_string("mode"), "a");

  const json big = {{"n", 10}, {"mode", "c"}};
  SpecObject b(big, "$.x");
  b.declare(decls, "test");
  EXPECT_EQ(testing::error_of([&] { b.get_int("n"); }),
            "spec: $.x.n: expected an integer in [1, 9], got number 10");
  EXPECT_NE(testing::error_of([&] { b.get_string("mode"); }).find("one of \"a\" or \"b\""),
            std::string::npos);
  // Reading an option the declaration lacks is a bug in the builder.
  EXPECT_NE(testing::error_of([&] { b.get_int("m"); }).find("declaration (schema.h) lacks"),
            std::string::npos);
}

TEST(Schema, AMisspeltOrInapplicableOptionNamesTheDeclaredOnes) {
  // A misspelt option of a stage, a source and a map function's args.
  const std::string misspelt = testing::error_of([] {
    PipelineDef::from_json(json::parse(
                               R"({"source": {"kind": "range", "count": 4},
                                   "stages": [{"op": "shuffle", "bufer": 4}]})"))
        .build();
  });
  EXPECT_NE(misspelt.find("$.stages[0].buffer: missing"), std::string::npos) << misspelt;
  const std::string extra = testing::error_of([] {
    PipelineDef::from_json(json::parse(R"({"source": {"kind": "range", "count": 4, "shard": 2}})"))
        .build();
  });
  EXPECT_NE(extra.find("$.source.shard: unknown field; did you mean \"shards\"? (known here: "
                       "count, kind, shards)"),
            std::string::npos)
      << extra;
  const std::string arg = testing::error_of([] {
    range(4).map("tokenize", {{"tokenizer", "bytes"}, {"vocab", "v.txt"}}).build();
  });
  EXPECT_NE(arg.find("$.stages[0].args.vocab: does not apply here"), std::string::npos) << arg;
  const std::string flip = testing::error_of([] {
    range(4).map("augment", {{"fllip", true}}).build();
  });
  EXPECT_NE(flip.find("did you mean \"flip\"?"), std::string::npos) << flip;
  EXPECT_NE(flip.find("random_resized_crop"), std::string::npos) << flip;  // every declared one
}

TEST(Schema, EverySizeLikeOptionHasAnUpperBound) {
  // The options that size a buffer, a batch or a sequence: each with a stated maximum.
  const std::map<std::string, std::vector<std::string>> sizes = {
      {"batch", {"size"}},
      {"padded_batch", {"size"}},
      {"pack", {"length"}},
      {"bucket", {"boundaries", "batch_sizes", "token_budget"}},
      {"shuffle", {"buffer"}},
      {"prefetch", {"buffer"}},
      {"map", {"buffer", "parallelism"}},
      {"interleave", {"cycle", "buffer_per_shard", "parallelism"}},
      {"echo", {"buffer", "buffer_bytes", "max_factor"}},
      {"cache", {"max_bytes"}}};
  const Registry& r = registry();
  for (const auto& [op, options] : sizes)
    for (const std::string& o : options) {
      const OptionDecl* d = r.stage_schemas.at(op).find(o);
      ASSERT_NE(d, nullptr) << op << "." << o;
      EXPECT_TRUE(d->max.has_value()) << op << "." << o << " has no upper bound";
    }
  EXPECT_NE(testing::error_of([] {
              range(4).padded_batch({.size = int64_t{1} << 40}).build();
            }).find("$.stages[0].size: expected an integer in [1, 16777216]"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho
