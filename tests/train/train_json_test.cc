// TrainConfig and TrainResult as JSON, each by one table of fields (src/train/json_fields.h):
// a run's result.json as the experiment runner wrote it, read and written again, is the
// same bytes; and a bad config gets the errors it always got, word for word.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "dataecho/train/train_config.h"
#include "dataecho/train/trainer.h"
#include "test_util.h"

namespace dataecho::train {
namespace {

using nlohmann::json;

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A result.json (src/train/experiment.cc, train_run) with its config and summary read
// into a TrainConfig and a TrainResult and written from them again, as the runner writes
// them: the config without the fields of the machine that ran it, the summary without
// the pipeline's stats.
std::string rewritten(const std::string& text) {
  json j = json::parse(text);
  json config = train_config_to_json(train_config_from_json(j["config"]));
  for (const char* k : {"out", "progress", "progress_seconds", "threads"}) config.erase(k);
  TrainResult r = TrainResult::from_json(j["summary"]);
  // The summary counts the evaluations; evals.jsonl holds them.
  r.evals.resize(j["summary"]["evaluations"].get<size_t>());
  json summary = r.to_json();
  summary.erase("pipeline_stats");
  j["config"] = config;
  j["summary"] = summary;
  return j.dump(2) + "\n";
}

// Two committed runs (results/protocol/network-split-r2 and results/lm/network-r4,
// copied): a CNN with the CPU split and a test set, and a transformer trained with AdamW
// to a target loss (the language model's fields, optimizer kind and clip_norm).
TEST(TrainJsonTest, AResultFileReadAndWrittenAgainIsTheSameBytes) {
  for (const char* name : {"cnn_split_result.json", "transformer_result.json"}) {
    const std::string text =
        file_text(std::string(DATAECHO_SOURCE_DIR) + "/tests/train/data/" + name);
    ASSERT_FALSE(text.empty()) << name;
    EXPECT_EQ(rewritten(text), text) << name;
  }
}

TEST(TrainJsonTest, WhatIsWrittenOnlyWhenSetIsLeftOut) {
  TrainConfig c;
  json j = train_config_to_json(c);
  EXPECT_EQ(j["model"], json::parse(R"({"kind": "mlp", "depth": 2, "width": 256,
                                        "num_classes": 10, "in_channels": 0})"));
  EXPECT_EQ(j["input"], json::parse(R"({"image_field": "image", "label_field": "label"})"));
  for (const char* k : {"target_accuracy", "target_loss", "cpu_split", "eval_spec", "test_spec"})
    EXPECT_FALSE(j.contains(k)) << k;
  EXPECT_TRUE(j["train_spec"].is_null());
  EXPECT_FALSE(j["optimizer"].contains("kind"));
  EXPECT_FALSE(j["optimizer"].contains("clip_norm"));
  c.input.mean = {0.5};
  c.optimizer.clip_norm = 2;
  c.cpu_split = 1;
  c.target_loss = 1.5;
  j = train_config_to_json(c);
  EXPECT_EQ(j["input"]["mean"], json::parse("[0.5]"));
  EXPECT_EQ(j["optimizer"]["clip_norm"], 2.0);
  EXPECT_EQ(j["cpu_split"], 1);
  EXPECT_EQ(j["target_loss"], 1.5);
  // And back (without a training spec, written as null): the same config.
  json back = j;
  back.erase("train_spec");
  EXPECT_EQ(train_config_to_json(train_config_from_json(back)), j);
}

// The messages of the field-by-field reader this table replaced, word for word; with
// several errors, the first in the order the fields are read.
TEST(TrainJsonTest, BadConfigsGetTheSameErrors) {
  auto error = [](const char* text) {
    return dataecho::testing::error_of([&] { train_config_from_json(json::parse(text)); });
  };
  EXPECT_EQ(error(R"({"model":{"kind":"mlp","widht":3}})"),
            "train config: $.model.widht: unknown field; did you mean \"width\"? (known here: "
            "context, depth, heads, in_channels, kind, num_classes, vocab_size, width)");
  EXPECT_EQ(error(R"({"max_steps":"ten"})"),
            "train config: $.max_steps: expected an integer, got string \"ten\"");
  EXPECT_EQ(error(R"({"model":{"depth":-1}})"),
            "train config: $.model.depth: expected an integer >= 0, got number -1");
  EXPECT_EQ(error(R"({"model":{"heads":0}})"),
            "train config: $.model.heads: expected an integer >= 1, got number 0");
  EXPECT_EQ(error(R"({"model":{"num_classes":1}})"),
            "train config: $.model.num_classes: expected an integer >= 2, got number 1");
  EXPECT_EQ(error(R"({"optimizer":{"kind":"adam"}})"),
            "train config: $.optimizer.kind: expected one of \"sgd\" or \"adamw\", got string "
            "\"adam\"");
  EXPECT_EQ(error(R"({"optimizer":{"lr":"fast"}})"),
            "train config: $.optimizer.lr: expected a number, got string \"fast\"");
  EXPECT_EQ(error(R"({"eval_mode":"later"})"),
            "train config: $.eval_mode: expected one of \"inline\" or \"snapshots\", got string "
            "\"later\"");
  EXPECT_EQ(error(R"({"seed":-3})"),
            "train config: $.seed: expected an integer >= 0, got number -3");
  EXPECT_EQ(error(R"({"input":{"mean":"x"}})"),
            "train config: $.input.mean: expected a number or a list of numbers");
  EXPECT_EQ(error(R"({"input":{"mean":[1,"x"]}})"),
            "train config: $.input.mean: expected a list of numbers");
  EXPECT_EQ(error(R"({"target_accuracy":null})"),
            "train config: $.target_accuracy: expected a number, got null null");
  EXPECT_EQ(error(R"({"input":5})"), "train config: $.input: expected an object, got number 5");
  EXPECT_EQ(error(R"({"max_step":3})"),
            "train config: $.max_step: unknown field; did you mean \"max_steps\"? (known here: "
            "checkpoint_every, comment, cpu_split, eval_at_end, eval_every, eval_every_fresh, "
            "eval_mode, eval_spec, input, keep_snapshots, lanes, max_fresh, max_seconds, "
            "max_steps, model, optimizer, out, progress, progress_seconds, seed, seed_pipeline, "
            "sharding, target_accuracy, target_loss, test_spec, threads, train_spec)");
  EXPECT_EQ(error(R"({"optimizer":{"clip":1},"max_fresh":-1.5})"),
            "train config: $.optimizer.clip: unknown field (known here: beta2, clip_norm, "
            "decay_steps, final_lr_fraction, kind, lr, momentum, nesterov, warmup_steps, "
            "weight_decay)");
  EXPECT_EQ(error(R"({"max_steps":"ten","input":{"mean":"x"},"optimizer":{"lr":"x"}})"),
            "train config: $.input.mean: expected a number or a list of numbers");
  EXPECT_EQ(error(R"({"optimizer":{"lr":"x","kind":"no"},"model":{"depth":-1}})"),
            "train config: $.model.depth: expected an integer >= 0, got number -1");
}

// How the ranks share the data: "files" (the default, written only when another is
// given, so that the configs of file-sharded runs stay as they were) or "elastic" with
// its lanes.
TEST(TrainJsonTest, ShardingAndLanesAreCheckedAndWrittenWhenGiven) {
  TrainConfig c;
  EXPECT_EQ(c.sharding, "files");
  EXPECT_EQ(c.lanes, 12);
  json j = train_config_to_json(c);
  EXPECT_FALSE(j.contains("sharding"));
  EXPECT_FALSE(j.contains("lanes"));
  c = train_config_from_json(json::parse(R"({"sharding": "elastic", "lanes": 6})"));
  EXPECT_EQ(c.sharding, "elastic");
  EXPECT_EQ(c.lanes, 6);
  j = train_config_to_json(c);
  EXPECT_EQ(j["sharding"], "elastic");
  EXPECT_EQ(j["lanes"], 6);
  auto error = [](const char* text) {
    return dataecho::testing::error_of([&] { train_config_from_json(json::parse(text)); });
  };
  EXPECT_EQ(error(R"({"sharding": "ranks"})"),
            "train config: $.sharding: expected one of \"files\" or \"elastic\", got string "
            "\"ranks\"");
  EXPECT_EQ(error(R"({"lanes": 0})"),
            "train config: $.lanes: expected an integer >= 1, got number 0");
  // Set in C++ (or by the flags), checked before a run.
  c = TrainConfig{};
  c.train_pipeline = [] { return std::unique_ptr<Pipeline>(); };
  c.sharding = "elastic";
  EXPECT_NE(dataecho::testing::error_of([&] {
              validate_train_config(c);
            }).find("elastic sharding needs a training spec"),
            std::string::npos);
  c.sharding = "lanes";
  EXPECT_EQ(dataecho::testing::error_of([&] { validate_train_config(c); }),
            "train config: sharding must be \"files\" or \"elastic\", got \"lanes\"");
  c.sharding = "files";
  c.lanes = 0;
  EXPECT_EQ(dataecho::testing::error_of([&] { validate_train_config(c); }),
            "train config: lanes must be >= 1, got 0");
}

TEST(TrainJsonTest, ABadSummaryNamesTheField) {
  EXPECT_EQ(dataecho::testing::error_of(
                [] { TrainResult::from_json(json::parse(R"({"steps": "many"})")); }),
            "train result: $.steps: expected an integer, got string \"many\"");
  TrainResult r = TrainResult::from_json(json::parse(R"({"steps": 5, "fresh_to_target": null})"));
  EXPECT_EQ(r.steps, 5);
  EXPECT_FALSE(r.fresh_to_target);
  // An evaluation's fields are required but raw_reads and tokens.
  EXPECT_EQ(dataecho::testing::error_of(
                [] { EvalRecord::from_json(json::parse(R"({"step": 1, "echoed": 0})")); }),
            "evaluation: $.fresh: missing; expected an integer");
}

}  // namespace
}  // namespace dataecho::train
