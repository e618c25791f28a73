// The experiment runner: the rule that places the echo stage, spec validation, and a
// tiny sweep on a Fashion-MNIST slice (MLP, two cells + a broken one) that writes the
// table and the plots, skips finished runs when rerun, and reports the broken cell.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "dataecho/core/error.h"
#include "dataecho/train/experiment.h"
#include "dataecho/train/train_config.h"
#include "fashion_data.h"
#include "test_util.h"

namespace dataecho::train {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json base_train_spec() {
  return json::parse(R"({
    "seed": 1,
    "source": {"kind": "range", "count": 10},
    "stages": [
      {"op": "shuffle", "buffer": 10},
      {"op": "map", "fn": "augment", "args": {"flip": true}},
      {"op": "batch", "size": 4},
      {"op": "prefetch", "buffer": 2}
    ]})");
}

std::vector<std::string> ops_of(const json& spec) {
  std::vector<std::string> ops;
  for (const auto& s : spec["stages"]) {
    std::string op = s["op"];
    if (op == "echo") op += s["factor"].is_string() ? "(adaptive)" : "(" + s["factor"].dump() + ")";
    if (op == "shuffle") op += "(" + s["buffer"].dump() + ")";
    if (op == "batch") op += "(" + s["size"].dump() + ")";
    ops.push_back(op);
  }
  return ops;
}

ExperimentCell cell(EchoVariant v, double factor, int64_t sb = 0, int64_t bs = 0) {
  ExperimentCell c;
  c.id = "c";
  c.variant = v;
  c.factor = factor;
  c.shuffle_after_echo = sb;
  c.batch_size = bs;
  return c;
}

TEST(ExperimentSpecRule, PlacesTheEchoWhereTheVariantSays) {
  const json base = base_train_spec();
  using V = std::vector<std::string>;
  EXPECT_EQ(ops_of(derive_cell_spec(base, cell(EchoVariant::kBaseline, 1, 0, 8))),
            (V{"shuffle(10)", "map", "batch(8)", "prefetch"}));
  EXPECT_EQ(ops_of(derive_cell_spec(base, cell(EchoVariant::kExampleBeforeAugmentation, 2, 5))),
            (V{"shuffle(10)", "echo(2)", "shuffle(5)", "map", "batch(4)", "prefetch"}));
  EXPECT_EQ(ops_of(derive_cell_spec(base, cell(EchoVariant::kExampleAfterAugmentation, 3))),
            (V{"shuffle(10)", "map", "echo(3)", "batch(4)", "prefetch"}));
  EXPECT_EQ(ops_of(derive_cell_spec(base, cell(EchoVariant::kBatch, 2, 100))),
            (V{"shuffle(10)", "map", "batch(4)", "echo(2)", "prefetch"}));
  ExperimentCell a = cell(EchoVariant::kAdaptive, 6, 7);
  json adaptive = derive_cell_spec(base, a);
  EXPECT_EQ(ops_of(adaptive),
            (V{"shuffle(10)", "echo(adaptive)", "shuffle(7)", "map", "batch(4)", "prefetch"}));
  EXPECT_EQ(adaptive["stages"][1]["max_factor"], 6.0);
  a.adaptive_placement = EchoVariant::kBatch;
  EXPECT_EQ(ops_of(derive_cell_spec(base, a)),
            (V{"shuffle(10)", "map", "batch(4)", "echo(adaptive)", "prefetch"}));

  // No augment map: example echoes go right before the batch stage.
  json plain = base;
  plain["stages"].erase(1);
  EXPECT_EQ(ops_of(derive_cell_spec(plain, cell(EchoVariant::kExampleBeforeAugmentation, 2))),
            (V{"shuffle(10)", "echo(2)", "batch(4)", "prefetch"}));
}

// A language model's pipeline: example echoes go around `pack` (echo_around), before it
// (documents) or after it (token blocks); the batch stage is padded_batch.
TEST(ExperimentSpecRule, PlacesTheEchoAroundTheStageTheSpecNames) {
  const json text = json::parse(R"({
    "seed": 1,
    "source": {"kind": "range", "count": 10},
    "stages": [
      {"op": "shuffle", "buffer": 10},
      {"op": "pack", "length": 65},
      {"op": "shuffle", "buffer": 8},
      {"op": "padded_batch", "size": 16, "lengths": false},
      {"op": "prefetch", "buffer": 2}
    ]})");
  using V = std::vector<std::string>;
  auto around = [](EchoVariant v, double f, int64_t sb = 0, int64_t bs = 0) {
    ExperimentCell c = cell(v, f, sb, bs);
    c.echo_around = "pack";
    return c;
  };
  EXPECT_EQ(ops_of(derive_cell_spec(text, around(EchoVariant::kExampleBeforeAugmentation, 2, 5))),
            (V{"shuffle(10)", "echo(2)", "shuffle(5)", "pack", "shuffle(8)", "padded_batch",
               "prefetch"}));
  EXPECT_EQ(ops_of(derive_cell_spec(text, around(EchoVariant::kExampleAfterAugmentation, 3))),
            (V{"shuffle(10)", "pack", "echo(3)", "shuffle(8)", "padded_batch", "prefetch"}));
  const json batched = derive_cell_spec(text, around(EchoVariant::kBatch, 2, 0, 32));
  EXPECT_EQ(ops_of(batched),
            (V{"shuffle(10)", "pack", "shuffle(8)", "padded_batch", "echo(2)", "prefetch"}));
  EXPECT_EQ(batched["stages"][3]["size"], 32);  // the cell's batch size on padded_batch
  // Without echo_around there is no augmentation map: right before the batch stage.
  EXPECT_EQ(ops_of(derive_cell_spec(text, cell(EchoVariant::kExampleBeforeAugmentation, 2))),
            (V{"shuffle(10)", "pack", "shuffle(8)", "echo(2)", "padded_batch", "prefetch"}));

  ExperimentCell missing = around(EchoVariant::kExampleAfterAugmentation, 2);
  missing.echo_around = "bucket";
  EXPECT_NE(testing::error_of([&] {
              derive_cell_spec(text, missing);
            }).find("has no bucket stage to echo around ($.echo_around)"),
            std::string::npos);
  json late = text;
  late["stages"].erase(1);
  late["stages"].push_back({{"op", "pack"}, {"length", 65}});
  EXPECT_NE(testing::error_of([&] {
              derive_cell_spec(late, around(EchoVariant::kExampleBeforeAugmentation, 2));
            }).find("pack stage comes after the batch stage"),
            std::string::npos);
  json bucketed = text;
  bucketed["stages"][3] = {{"op", "bucket"}, {"boundaries", {8}}, {"batch_sizes", {4, 2}}};
  EXPECT_NE(testing::error_of([&] {
              derive_cell_spec(bucketed, around(EchoVariant::kBaseline, 1, 0, 8));
            }).find("bucket takes one per bucket"),
            std::string::npos);
  EXPECT_EQ(ops_of(derive_cell_spec(bucketed, around(EchoVariant::kBatch, 2)))[4], "echo(2)");
}

TEST(ExperimentSpecRule, RefusesWhatItCannotPlace) {
  json fused = base_train_spec();
  fused["stages"][1]["fn"] = "decode_augment";
  EXPECT_NE(testing::error_of([&] {
              derive_cell_spec(fused, cell(EchoVariant::kExampleBeforeAugmentation, 2));
            }).find("cannot echo before augmentation"),
            std::string::npos);
  // After augmentation works with the fused map.
  EXPECT_EQ(
      derive_cell_spec(fused, cell(EchoVariant::kExampleAfterAugmentation, 2))["stages"][2]["op"],
      "echo");
  json echoed = base_train_spec();
  echoed["stages"][0] = {{"op", "echo"}, {"factor", 2}};
  EXPECT_NE(testing::error_of([&] {
              derive_cell_spec(echoed, cell(EchoVariant::kBatch, 2));
            }).find("already has an echo stage ($.stages[0])"),
            std::string::npos);
  json nobatch = base_train_spec();
  nobatch["stages"].erase(2);
  EXPECT_NE(testing::error_of([&] {
              derive_cell_spec(nobatch, cell(EchoVariant::kBaseline, 1));
            }).find("no batch stage"),
            std::string::npos);
}

json tiny_base_config() {
  json train = base_train_spec();
  train["source"] = {{"kind", "idx"},
                     {"images", std::string(testing::kFashionDir) + "/train-images-idx3-ubyte.gz"},
                     {"labels", std::string(testing::kFashionDir) + "/train-labels-idx1-ubyte.gz"},
                     {"limit", 1000}};
  train["stages"] = json::parse(R"([
      {"op": "repeat", "count": -1},
      {"op": "shuffle", "buffer": 1000},
      {"op": "map", "fn": "augment", "args": {"flip": true, "normalize": true}},
      {"op": "batch", "size": 32, "drop_remainder": true},
      {"op": "prefetch", "buffer": 2}])");
  json eval = {
      {"source",
       {{"kind", "idx"},
        {"images", std::string(testing::kFashionDir) + "/t10k-images-idx3-ubyte.gz"},
        {"labels", std::string(testing::kFashionDir) + "/t10k-labels-idx1-ubyte.gz"},
        {"limit", 500}}},
      {"stages",
       json::parse(R"([{"op": "map", "fn": "normalize"}, {"op": "batch", "size": 250}])")}};
  return {{"train_spec", train},
          {"eval_spec", eval},
          {"model", {{"kind", "mlp"}, {"depth", 1}, {"width", 64}}},
          {"optimizer", {{"lr", 0.05}}},
          {"target_accuracy", 0.6},
          {"max_steps", 120},
          {"eval_every", 20},
          {"threads", 1},
          {"progress", "off"}};
}

TEST(ExperimentSpec, RefusesBadSpecsWithThePath) {
  json spec = {{"base", tiny_base_config()},
               {"grid", {{"variants", {"baseline", "echo_everywhere"}}}}};
  EXPECT_NE(testing::error_of([&] {
              experiment_spec_from_json(spec, "");
            }).find("$.grid.variants[1]: unknown echo variant 'echo_everywhere'"),
            std::string::npos);
  spec["grid"] = {{"variants", {"batch"}}, {"factors", {2, 0.5}}};
  EXPECT_NE(testing::error_of([&] {
              experiment_spec_from_json(spec, "");
            }).find("$.grid.factors[1]: expected a number >= 1"),
            std::string::npos);
  spec["grid"] = {{"variants", {"batch"}}, {"factor", {2}}};
  EXPECT_NE(testing::error_of([&] { experiment_spec_from_json(spec, ""); }).find("factor"),
            std::string::npos);
  spec["grid"] = {{"variants", {"batch"}}};
  spec["base"].erase("max_steps");
  EXPECT_NE(testing::error_of([&] { experiment_spec_from_json(spec, ""); }).find("no budget"),
            std::string::npos);
}

// Spec names in "overrides" are relative to the experiment spec's folder, also when the
// base config lives in another folder (and resolves its own names against that one).
TEST(ExperimentSpec, OverrideSpecNamesAreRelativeToTheExperimentSpec) {
  // Under the current directory and named relatively, as on a command line (a path
  // through / would hide the bug: "/.." is "/").
  const fs::path dir = "dataecho-exp-paths-" + std::to_string(getpid());
  struct RemoveAtEnd {
    fs::path p;
    ~RemoveAtEnd() { fs::remove_all(p); }
  } remove_at_end{dir};
  fs::create_directories(dir / "examples");
  fs::create_directories(dir / "experiments");
  auto write = [](const fs::path& p, const json& j) { std::ofstream(p) << j.dump(); };
  json base = tiny_base_config();
  json base_train = base["train_spec"];
  base_train["comment"] = "the base's";
  json exp_train = base["train_spec"];
  exp_train["comment"] = "the experiment's";
  write(dir / "examples" / "train.json", base_train);
  write(dir / "experiments" / "train.json", exp_train);
  base["train_spec"] = "train.json";
  write(dir / "examples" / "config.json", base);
  json spec = {{"base", "../examples/config.json"}, {"grid", {{"variants", {"baseline"}}}}};
  write(dir / "experiments" / "plain.json", spec);
  spec["overrides"] = {{"train_spec", "train.json"}};
  write(dir / "experiments" / "overridden.json", spec);
  auto train_comment = [&](const std::string& name) {
    ExperimentSpec s = load_experiment_spec((dir / "experiments" / name).string());
    return train_config_from_json(s.base_config, s.base_dir)
        .train_spec->to_json()
        .value("comment", "");
  };
  EXPECT_EQ(train_comment("plain.json"), "the base's");
  EXPECT_EQ(train_comment("overridden.json"), "the experiment's");
}

TEST(ExperimentSpec, ExpandsTheGrid) {
  json spec = {{"base", tiny_base_config()},
               {"grid",
                {{"variants", {"baseline", "example_before_augmentation", "batch", "adaptive"}},
                 {"factors", {2, 3}},
                 {"shuffle_after_echo", {0, 100}},
                 {"seeds", {1, 2}}}}};
  ExperimentSpec s = experiment_spec_from_json(spec, "");
  std::vector<std::string> ids;
  for (const auto& c : s.cells) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"baseline", "before_aug-e2", "before_aug-e2-sb100",
                                           "before_aug-e3", "before_aug-e3-sb100", "batch-e2",
                                           "batch-e3", "adaptive-m3", "adaptive-m3-sb100"}));
  EXPECT_EQ(s.cells[0].seeds, (std::vector<uint64_t>{1, 2}));

  // Example echoes around `pack`: the short variant names, and ids that say where.
  spec["echo_around"] = "pack";
  spec["grid"] = {{"variants", {"example_before", "example_after", "adaptive"}},
                  {"factors", {2}},
                  {"adaptive_placement", "example_after_augmentation"}};
  spec["cells"] = {{{"variant", "example_before"}, {"factor", 4}}};
  s = experiment_spec_from_json(spec, "");
  ids.clear();
  for (const auto& c : s.cells) {
    ids.push_back(c.id);
    EXPECT_EQ(c.echo_around, "pack");
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"before_pack-e2", "after_pack-e2",
                                           "adaptive-m2-after_pack", "before_pack-e4"}));
}

TEST(ExperimentSpec, CellsAloneNeedNoGridButEachItsSeeds) {
  json spec = {{"base", tiny_base_config()},
               {"cells",
                {{{"id", "baseline-s20"},
                  {"variant", "baseline"},
                  {"seeds", {1, 2}},
                  {"overrides", {{"max_steps", 20}}}},
                 {{"variant", "example_before_augmentation"}, {"factor", 4}, {"seeds", {3}}}}}};
  ExperimentSpec s = experiment_spec_from_json(spec, "");
  ASSERT_EQ(s.cells.size(), 2u);
  EXPECT_EQ(s.cells[0].id, "baseline-s20");
  EXPECT_EQ(s.cells[0].seeds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.cells[1].seeds, (std::vector<uint64_t>{3}));
  spec["cells"][1].erase("seeds");
  EXPECT_NE(testing::error_of([&] {
              experiment_spec_from_json(spec, "");
            }).find("$.cells[1].seeds: missing; expected a list of seeds"),
            std::string::npos);
  spec.erase("cells");
  EXPECT_NE(testing::error_of([&] { experiment_spec_from_json(spec, ""); }).find("$.grid"),
            std::string::npos);
}

TEST(Experiment, TinySweepWritesTableAndPlotsResumesAndReportsABrokenCell) {
  if (!testing::fashion_available()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string out = testing::temp_dir() + "/sweep";
  json spec_json = {{"name", "tiny"},
                    {"base", tiny_base_config()},
                    {"out", out},
                    {"grid",
                     {{"variants", {"baseline", "example_before_augmentation"}},
                      {"factors", {2}},
                      {"shuffle_after_echo", {200}},
                      {"seeds", {1}}}},
                    {"cells",
                     {{{"id", "broken"},
                       {"variant", "baseline"},
                       {"overrides", {{"model", {{"kind", "perceptron"}}}}}}}}};
  ExperimentSpec spec = experiment_spec_from_json(spec_json, "");
  ASSERT_EQ(spec.cells.size(), 3u);
  std::vector<std::string> lines;
  ExperimentOptions options;
  options.progress = "off";
  options.log = [&](const std::string& s) { lines.push_back(s); };

  ExperimentReport r = run_experiment(spec, options);
  EXPECT_EQ(r.runs_total, 3);
  EXPECT_EQ(r.runs_trained, 2);
  EXPECT_EQ(r.runs_failed, 1);
  EXPECT_EQ(r.runs_skipped, 0);
  ASSERT_EQ(r.cells.size(), 3u);
  EXPECT_EQ(r.cells[0].status, "done");
  EXPECT_EQ(r.cells[1].status, "done");
  EXPECT_EQ(r.cells[2].status, "failed");
  ASSERT_EQ(r.cells[2].errors.size(), 1u);
  EXPECT_NE(r.cells[2].errors[0].find("unknown model \"perceptron\""), std::string::npos)
      << r.cells[2].errors[0];
  // The progress names cell k of n; the failure is in the log.
  bool saw_head = false, saw_failure = false;
  for (const auto& l : lines) {
    saw_head |= l.find("[cell 2/3] before_aug-e2-sb200 seed 1") != std::string::npos;
    saw_failure |= l.find("FAILED") != std::string::npos;
  }
  EXPECT_TRUE(saw_head);
  EXPECT_TRUE(saw_failure);
  // Both real cells reach 60% on the slice; the echo cell consumed ~2 rows per fresh one.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.cells[i].reached, 1) << r.cells[i].cell.id;
    ASSERT_TRUE(r.cells[i].fresh.median) << r.cells[i].cell.id;
  }
  // Rows per distinct example trained on: below 2 when the run stops with the second
  // copies of its last examples still in the shuffle buffer after the echo (1.85 here).
  EXPECT_NEAR(*r.cells[1].achieved_echo.median, 2.0, 0.2);
  EXPECT_TRUE(r.cells[1].fresh_reduction.has_value());

  // The table.
  std::ifstream csv(out + "/results.csv");
  std::vector<std::string> rows;
  for (std::string line; std::getline(csv, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].rfind("cell,variant,factor,", 0), 0u);
  EXPECT_EQ(rows[1].rfind("baseline,baseline,", 0), 0u);
  EXPECT_NE(rows[3].find("failed"), std::string::npos);
  json results = json::parse(std::ifstream(out + "/results.json"));
  ASSERT_EQ(results["cells"].size(), 3u);
  EXPECT_EQ(results["cells"][1]["variant"], "example_before_augmentation");
  EXPECT_TRUE(results["cells"][1]["fresh_to_target"]["median"].is_number());
  EXPECT_TRUE(fs::exists(out + "/cells/baseline/seed-1/evals.jsonl"));

  // The plots (when gnuplot is there).
  EXPECT_TRUE(fs::exists(out + "/plots/plots.gp"));
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    for (const char* f : {"fresh_vs_factor", "accuracy_vs_fresh", "speedup_vs_factor"}) {
      for (const char* ext : {".png", ".svg"}) {
        const std::string p = out + "/plots/" + f + ext;
        EXPECT_TRUE(fs::exists(p) && fs::file_size(p) > 1000) << p << ": " << r.plot_note;
      }
    }
  }

  // Rerun: the finished runs are skipped, the broken one is tried (and reported) again.
  lines.clear();
  ExperimentReport again = run_experiment(spec, options);
  EXPECT_EQ(again.runs_skipped, 2);
  EXPECT_EQ(again.runs_trained, 0);
  EXPECT_EQ(again.runs_failed, 1);
  EXPECT_EQ(again.cells[1].fresh.median, r.cells[1].fresh.median);

  // A changed cell config is not "done": another factor reruns that cell only.
  spec_json["grid"]["factors"] = {3};
  ExperimentSpec changed = experiment_spec_from_json(spec_json, "");
  changed.cells.pop_back();  // without the broken cell
  options.dry_run = true;
  ExperimentReport dry = run_experiment(changed, options);
  EXPECT_EQ(dry.runs_skipped, 1);  // the baseline
  EXPECT_EQ(dry.runs_trained, 0);

  // A second seed: the progress counts only the runs left, although the finished seed 1
  // of the second cell comes after the pending seed 2 of the first.
  spec_json["grid"]["factors"] = {2};
  spec_json["grid"]["seeds"] = {1, 2};
  ExperimentSpec more = experiment_spec_from_json(spec_json, "");
  more.cells.pop_back();
  lines.clear();
  ExperimentReport two = run_experiment(more, options);
  EXPECT_EQ(two.runs_skipped, 2);
  std::vector<std::string> heads;
  for (const auto& l : lines)
    if (l.rfind("[cell ", 0) == 0) heads.push_back(l.substr(0, l.find(" | ETA")));
  EXPECT_EQ(heads, (std::vector<std::string>{
                       "[cell 1/2] baseline seed 2 | run 1/2 of this sweep",
                       "[cell 2/2] before_aug-e2-sb200 seed 2 | run 2/2 of this sweep"}));
}

}  // namespace
}  // namespace dataecho::train
