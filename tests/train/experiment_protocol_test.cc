// The protocol's bookkeeping on synthetic run files with known answers: the report's
// medians, intervals, reductions and speedups with censored runs, and the learning-rate
// tuning's choice (interior, widened at an edge, refused seeds). Nothing trains here: the
// result files are written as a finished run writes them.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "dataecho/train/experiment.h"
#include "test_util.h"
#include "train/experiment_internal.h"

namespace dataecho::train {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json base_config() {
  json train = json::parse(R"({"seed": 1, "source": {"kind": "range", "count": 100},
    "stages": [{"op": "repeat", "count": -1}, {"op": "shuffle", "buffer": 100},
               {"op": "map", "fn": "augment", "args": {"flip": true}},
               {"op": "batch", "size": 10}]})");
  json eval = json::parse(R"({"source": {"kind": "range", "count": 10},
    "stages": [{"op": "batch", "size": 10}]})");
  return {{"train_spec", train},        {"eval_spec", eval},      {"model", {{"kind", "mlp"}}},
          {"optimizer", {{"lr", 0.1}}}, {"target_accuracy", 0.9}, {"max_fresh", 1000},
          {"progress", "off"}};
}

json snapshots_base() {
  json b = base_config();
  b["eval_mode"] = "snapshots";
  return b;
}

// Writes the result file of a finished run: fresh (and wall seconds) to target, or a
// run that missed the target (`hit` false) at its budget.
void write_run(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed, double fresh,
               double wall, bool hit = true) {
  json identity;
  TrainConfig c = detail::cell_config(spec, cell, seed, ExperimentOptions{}, &identity);
  fs::create_directories(c.out);
  json summary = {{"reached_target", hit},
                  {"fresh", hit ? fresh + 100 : fresh},
                  {"wall_seconds", hit ? wall + 1 : wall},
                  {"achieved_echo", 1.0},
                  {"r_estimate", 1.0},
                  {"steps_per_second", 1000.0 / wall}};
  if (hit) {
    summary["fresh_to_target"] = fresh;
    summary["wall_seconds_to_target"] = wall;
    summary["steps_to_target"] = fresh / 10;
    summary["seconds_to_target"] = wall;
  }
  detail::write_json_file(
      c.out + "/result.json",
      {{"cell", cell.id}, {"seed", seed}, {"config", identity}, {"summary", summary}});
}

ExperimentSpec make_spec(const std::string& out, json tuning = nullptr) {
  json j = {{"name", "synthetic"},
            {"base", base_config()},
            {"out", out},
            {"grid",
             {{"variants", {"baseline", "example_before_augmentation"}},
              {"factors", {4}},
              {"seeds", {1, 2, 3, 4, 5}}}}};
  if (!tuning.is_null()) j["tuning"] = tuning;
  return experiment_spec_from_json(j, "");
}

TEST(ExperimentProtocol, ReportGivesMediansIntervalsAndRatiosWithCensoredRuns) {
  const std::string out = testing::temp_dir() + "/synthetic";
  ExperimentSpec spec = make_spec(out);
  ASSERT_EQ(spec.cells.size(), 2u);
  // Baseline: 1000 fresh examples and 100 s to target on every seed. Echo: 250, 240, 260,
  // 250 and one run that missed the target within its budget (1000 fresh, 90 s).
  for (uint64_t s = 1; s <= 5; ++s) write_run(spec, spec.cells[0], s, 1000, 100);
  const double fresh[] = {250, 240, 260, 250};
  const double wall[] = {40, 50, 45, 40};
  for (uint64_t s = 1; s <= 4; ++s) write_run(spec, spec.cells[1], s, fresh[s - 1], wall[s - 1]);
  write_run(spec, spec.cells[1], 5, 1000, 90, false);

  ExperimentOptions o;
  o.plots = false;
  ExperimentReport r = report_experiment(spec, o);
  const CellResult& base = r.cells[0];
  const CellResult& echo = r.cells[1];
  ASSERT_TRUE(base.fresh_estimate && echo.fresh_estimate);
  EXPECT_DOUBLE_EQ(base.fresh_estimate->median, 1000);
  EXPECT_DOUBLE_EQ(base.fresh_estimate->ci.lo, 1000);
  // Echo: {240, 250, 250, 260, 1000 (censored)}: median 250, not censored.
  EXPECT_DOUBLE_EQ(echo.fresh_estimate->median, 250);
  EXPECT_FALSE(echo.fresh_estimate->median_censored);
  EXPECT_EQ(echo.fresh_estimate->censored, 1);
  EXPECT_EQ(echo.reached, 4);
  // The reduction is 1000 / 250 = 4, its interval within 1000/1000 .. 1000/240.
  ASSERT_TRUE(echo.fresh_reduction_estimate);
  EXPECT_DOUBLE_EQ(echo.fresh_reduction_estimate->ratio, 4);
  EXPECT_GE(echo.fresh_reduction_estimate->ci.lo, 1.0);
  EXPECT_LE(echo.fresh_reduction_estimate->ci.hi, 1000.0 / 240);
  EXPECT_LT(echo.fresh_reduction_estimate->ci.lo, 4);
  // Speedup: wall {40, 40, 45, 50, 90 (censored)}: median 45, 100 / 45.
  ASSERT_TRUE(echo.speedup_estimate);
  EXPECT_DOUBLE_EQ(echo.speedup_estimate->ratio, 100.0 / 45);
  EXPECT_LE(echo.speedup_estimate->ci.hi, 100.0 / 40 + 1e-12);
  EXPECT_GE(echo.speedup_estimate->ci.lo, 100.0 / 90 - 1e-12);
  // C: the cell's median steps per second over the baseline's (1000/45 over 1000/100).
  ASSERT_TRUE(echo.cpu_cap);
  EXPECT_NEAR(*echo.cpu_cap, 100.0 / 45, 1e-9);
  // The legacy figures (over the runs that reached the target) are still there.
  EXPECT_DOUBLE_EQ(*echo.fresh.median, 250);

  json results = json::parse(std::ifstream(out + "/results.json"));
  EXPECT_DOUBLE_EQ(results["cells"][1]["estimates"]["fresh_reduction"]["ratio"].get<double>(), 4);
  EXPECT_EQ(results["cells"][1]["estimates"]["fresh_to_target"]["censored"].get<int>(), 1);
  std::ifstream csv(out + "/results.csv");
  std::string header, row0, row1;
  std::getline(csv, header);
  std::getline(csv, row0);
  std::getline(csv, row1);
  EXPECT_NE(header.find("fresh_reduction_ci_lo"), std::string::npos);
  EXPECT_NE(r.to_text().find("4.00x ["), std::string::npos) << r.to_text();
}

// The second-shuffle control: an example-echo cell with a shuffle after the echo is also compared
// with the e = 1 cell that has the same shuffle; a cell without that shuffle is not.
TEST(ExperimentProtocol, EchoCellsWithAShuffleAreComparedWithTheirControl) {
  const std::string out = testing::temp_dir() + "/controlled";
  json j = {{"name", "controlled"},
            {"base", base_config()},
            {"out", out},
            {"grid",
             {{"variants", {"baseline", "example_before_augmentation"}},
              {"factors", {1, 4}},
              {"shuffle_after_echo", {50}},
              {"seeds", {1, 2, 3}}}},
            {"cells", {{{"variant", "example_before_augmentation"}, {"factor", 4}}}}};
  ExperimentSpec spec = experiment_spec_from_json(j, "");
  ASSERT_EQ(spec.cells.size(), 4u);
  // Baseline 1000, the control (e = 1, shuffle 50) 800, e = 4 with the shuffle 200, e = 4
  // without it 250: 5x against the baseline, 4x against the control.
  const double fresh[] = {1000, 800, 200, 250};
  for (size_t i = 0; i < 4; ++i)
    for (uint64_t s = 1; s <= 3; ++s) write_run(spec, spec.cells[i], s, fresh[i], 100);
  ExperimentOptions o;
  o.plots = false;
  ExperimentReport r = report_experiment(spec, o);
  std::map<std::string, const CellResult*> by_id;
  for (const auto& c : r.cells) by_id[c.cell.id] = &c;
  const CellResult* control = by_id.at("before_aug-e1-sb50");
  const CellResult* shuffled = by_id.at("before_aug-e4-sb50");
  ASSERT_TRUE(by_id.count("before_aug-e4")) << "the cell without a shuffle after the echo";
  EXPECT_EQ(shuffled->control, control->cell.id);
  ASSERT_TRUE(shuffled->fresh_reduction_vs_control);
  EXPECT_DOUBLE_EQ(shuffled->fresh_reduction_vs_control->ratio, 4);
  EXPECT_DOUBLE_EQ(shuffled->fresh_reduction_estimate->ratio, 5);
  EXPECT_TRUE(control->control.empty()) << "the control is compared with the baseline only";
  EXPECT_DOUBLE_EQ(control->fresh_reduction_estimate->ratio, 1.25);
  EXPECT_TRUE(by_id.at("before_aug-e4")->control.empty());
  EXPECT_FALSE(by_id.at("before_aug-e4")->fresh_reduction_vs_control);
  const std::string text = r.to_text();
  EXPECT_NE(text.find("before_aug-e4-sb50 vs before_aug-e1-sb50: 4.00x [4.00-4.00] (vs baseline "
                      "5.00x [5.00-5.00])"),
            std::string::npos)
      << text;
  json results = json::parse(std::ifstream(out + "/results.json"));
  for (const auto& c : results["cells"]) {
    if (c["cell"] != "before_aug-e4-sb50") {
      EXPECT_FALSE(c.contains("control")) << c.dump();
      continue;
    }
    EXPECT_EQ(c["control"], "before_aug-e1-sb50");
    EXPECT_DOUBLE_EQ(c["estimates"]["fresh_reduction_vs_control"]["ratio"].get<double>(), 4);
  }
}

TEST(ExperimentProtocol, TuningChoosesTheInteriorRateWithTheFewestFreshExamples) {
  const std::string out = testing::temp_dir() + "/tuning";
  ExperimentSpec spec = make_spec(out, {{"lr", {0.4, 0.1, 0.2, 0.05}}, {"seeds", {101, 102}}});
  EXPECT_EQ(spec.tuning.lrs, (std::vector<double>{0.05, 0.1, 0.2, 0.4}));
  const ExperimentCell& base = spec.cells[0];
  TuningState st = tuning_state(spec, base);
  EXPECT_EQ(st.pending.size(), 4u);  // nothing ran yet
  EXPECT_FALSE(st.chosen);
  // Medians over the two seeds: 0.05 -> 900, 0.1 -> 600, 0.2 -> 500, 0.4 -> 800.
  const std::map<double, std::pair<double, double>> fresh = {
      {0.05, {900, 900}}, {0.1, {500, 700}}, {0.2, {400, 600}}, {0.4, {800, 800}}};
  for (const auto& [lr, f] : fresh) {
    write_run(spec, detail::tuning_cell(base, lr), 101, f.first, 10);
    write_run(spec, detail::tuning_cell(base, lr), 102, f.second, 10);
  }
  st = tuning_state(spec, base);
  EXPECT_TRUE(st.pending.empty());
  ASSERT_TRUE(st.chosen);
  EXPECT_DOUBLE_EQ(*st.chosen, 0.2);
  EXPECT_TRUE(st.note.empty());
  EXPECT_TRUE(fs::exists(out + "/cells/baseline/tune/lr-0.2/seed-101/result.json"));

  // The echo cell's best is the largest rate (600 at 0.4): the sweep widens to 0.8.
  const ExperimentCell& echo = spec.cells[1];
  for (double lr : {0.05, 0.1, 0.2, 0.4})
    for (uint64_t s : {101, 102})
      write_run(spec, detail::tuning_cell(echo, lr), s, 1000 - lr * 1000, 10);
  st = tuning_state(spec, echo);
  ASSERT_EQ(st.pending.size(), 1u);
  EXPECT_DOUBLE_EQ(st.pending[0], 0.8);
  for (uint64_t s : {101, 102}) write_run(spec, detail::tuning_cell(echo, 0.8), s, 700, 10);
  st = tuning_state(spec, echo);
  EXPECT_TRUE(st.pending.empty());
  ASSERT_TRUE(st.chosen);  // 0.4 (600) is now interior: 0.8 gave 700
  EXPECT_DOUBLE_EQ(*st.chosen, 0.4);

  // The report shows the tuning and compares the final runs at the chosen rates.
  ExperimentCell final_base = base, final_echo = echo;
  final_base.lr = 0.2;
  final_echo.lr = 0.4;
  for (uint64_t s = 1; s <= 5; ++s) {
    write_run(spec, final_base, s, 1000, 100);
    write_run(spec, final_echo, s, 500, 50);
  }
  ExperimentOptions o;
  o.plots = false;
  ExperimentReport r = report_experiment(spec, o);
  ASSERT_TRUE(r.cells[1].fresh_reduction_estimate);
  EXPECT_DOUBLE_EQ(r.cells[1].fresh_reduction_estimate->ratio, 2);
  EXPECT_NE(r.to_text().find("learning-rate tuning"), std::string::npos);
  EXPECT_NE(r.to_text().find("0.4*"), std::string::npos) << r.to_text();

  // Another experiment (the network runs) takes its cells' rates from this one's tuning:
  // by cell id, or through "map"; a cell the sweep has not tuned is refused, by name.
  const std::string sweep_file = testing::temp_dir() + "/sweep.json";
  std::ofstream(sweep_file) << spec.source.dump();
  json net = {{"name", "network"},
              {"base", base_config()},
              {"out", testing::temp_dir() + "/network"},
              {"tuning", {{"from", sweep_file}, {"map", {{"adaptive-m5", "before_aug-e4"}}}}},
              {"grid",
               {{"variants", {"baseline", "example_before_augmentation", "adaptive"}},
                {"factors", {4, 2}},
                {"adaptive_max_factor", 5},
                {"seeds", {1}}}}};
  ExperimentSpec n = experiment_spec_from_json(net, "");
  std::map<std::string, std::optional<double>> chosen;
  for (const auto& c : n.cells) chosen[c.id] = tuning_state(n, c).chosen;
  EXPECT_EQ(chosen["baseline"], 0.2);
  EXPECT_EQ(chosen["before_aug-e4"], 0.4);
  EXPECT_EQ(chosen["adaptive-m5"], 0.4);
  EXPECT_FALSE(chosen["before_aug-e2"].has_value());
  const ExperimentCell* e2 = nullptr;
  for (const auto& c : n.cells)
    if (c.id == "before_aug-e2") e2 = &c;
  ASSERT_NE(e2, nullptr);
  EXPECT_NE(tuning_state(n, *e2).note.find("no cell before_aug-e2"), std::string::npos)
      << tuning_state(n, *e2).note;

  // A reading of its own beside "from" reads this experiment's figures (the demo reads
  // its runs as held); the rates still come from the sweep as it chose them.
  EXPECT_EQ(report_experiment(n, o).reading, "first_touch");
  net["tuning"]["reading"] = "held";
  net["tuning"]["margin"] = 0.01;
  EXPECT_CONTAINS(testing::error_of([&] { experiment_spec_from_json(net, ""); }),
                  ("set \"eval_mode\": \"snapshots\""));
  net["base"] = snapshots_base();
  const ExperimentSpec held = experiment_spec_from_json(net, "");
  EXPECT_EQ(tuning_state(held, held.cells[0]).chosen, 0.2);
  EXPECT_EQ(report_experiment(held, o).reading, "held");
  EXPECT_DOUBLE_EQ(report_experiment(held, o).margin, 0.01);
}

TEST(ExperimentProtocol, TuningStopsWideningAndSaysSo) {
  const std::string out = testing::temp_dir() + "/edge";
  ExperimentSpec spec = make_spec(out, {{"lr", {0.1, 0.2, 0.4}}, {"seeds", {101}}, {"widen", 1}});
  const ExperimentCell& base = spec.cells[0];
  for (double lr : {0.1, 0.2, 0.4})
    write_run(spec, detail::tuning_cell(base, lr), 101, lr * 1000, 1);
  TuningState st = tuning_state(spec, base);
  ASSERT_EQ(st.pending.size(), 1u);
  EXPECT_DOUBLE_EQ(st.pending[0], 0.05);
  write_run(spec, detail::tuning_cell(base, 0.05), 101, 50, 1);
  st = tuning_state(spec, base);
  ASSERT_TRUE(st.chosen);
  EXPECT_DOUBLE_EQ(*st.chosen, 0.05);
  EXPECT_NE(st.note.find("low edge"), std::string::npos) << st.note;
}

TEST(ExperimentProtocol, TuningSeedsMustDifferFromTheFinalSeeds) {
  EXPECT_NE(testing::error_of([] {
              make_spec("x", {{"lr", {0.1, 0.2, 0.4}}, {"seeds", {3}}});
            }).find("also a final seed"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              make_spec("x", {{"lr", {0.1, 0.2}}, {"seeds", {101}}});
            }).find("at least 3 learning rates"),
            std::string::npos);
}

TEST(ExperimentProtocol, HeldIsTheFirstEvaluationFromWhichTheRunKeepsTheTarget) {
  // Target 0.9, margin 0.01: the floor is 0.89.
  EXPECT_EQ(held_index({0.88, 0.90, 0.895, 0.91, 0.905}, 0.9, 0.01), 1u);
  EXPECT_EQ(held_index({0.88, 0.90, 0.889, 0.91, 0.905}, 0.9, 0.01), 3u) << "a dip below the floor";
  EXPECT_EQ(held_index({0.88, 0.90, 0.89, 0.90}, 0.9, 0.01), 1u) << "at the floor is not below it";
  EXPECT_EQ(held_index({0.91, 0.92, 0.85}, 0.9, 0.01), std::nullopt) << "the last one fell";
  EXPECT_EQ(held_index({}, 0.9, 0.01), std::nullopt);
  EXPECT_EQ(held_index({0.85, 0.9}, 0.9, 0), 1u) << "0.9 read back meets 0.9";
}

TEST(ExperimentProtocol, ALossIsHeldBelowItsTarget) {
  // Target 2.0 nats, margin 0.05: the ceiling is 2.05.
  EXPECT_EQ(held_index_of_loss({2.2, 2.0, 2.04, 1.9, 1.95}, 2.0, 0.05), 1u);
  EXPECT_EQ(held_index_of_loss({2.2, 1.99, 2.06, 1.9, 1.95}, 2.0, 0.05), 3u)
      << "a rise above the ceiling";
  EXPECT_EQ(held_index_of_loss({2.2, 2.0, 2.05, 2.0}, 2.0, 0.05), 1u)
      << "at the ceiling is not above it";
  EXPECT_EQ(held_index_of_loss({1.9, 1.8, 2.5}, 2.0, 0.05), std::nullopt) << "the last one rose";
  EXPECT_EQ(held_index_of_loss({1.9, std::nan(""), 1.8}, 2.0, 0.05), 2u)
      << "an evaluation without a loss does not hold it";
  EXPECT_EQ(held_index_of_loss({}, 2.0, 0.05), std::nullopt);
}

// The evaluations of a run (evals.jsonl), one per 100 fresh examples from 100 on, at
// step fresh / 10, fresh / 100 seconds of training and fresh / 100 + 1 on the wall clock.
// With `loss`, each evaluation's loss is the given value and its accuracy 0.
void write_evals(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed,
                 const std::vector<double>& values, bool loss = false) {
  std::ofstream out(detail::run_dir(spec, cell, seed) + "/evals.jsonl");
  for (size_t i = 0; i < values.size(); ++i) {
    const double fresh = 100.0 * static_cast<double>(i + 1);
    out << json{{"fresh", fresh},
                {"accuracy", loss ? 0.0 : values[i]},
                {"loss", loss ? values[i] : 1.0},
                {"step", fresh / 10},
                {"train_seconds", fresh / 100},
                {"wall_seconds", fresh / 100 + 1}}
               .dump()
        << "\n";
  }
}

TEST(ExperimentProtocol, TuningCanChooseByTheHeldReading) {
  const std::string out = testing::temp_dir() + "/held";
  json j = {
      {"name", "held"},
      {"base", snapshots_base()},
      {"out", out},
      {"tuning",
       {{"lr", {0.05, 0.1, 0.2, 0.4}}, {"seeds", {101}}, {"reading", "held"}, {"margin", 0.01}}},
      {"grid", {{"variants", {"baseline"}}, {"seeds", {1}}}}};
  ExperimentSpec spec = experiment_spec_from_json(j, "");
  EXPECT_EQ(spec.tuning.reading, "held");
  const ExperimentCell& base = spec.cells[0];
  // First touch: 0.1 at 300 fresh examples, but it falls to 0.85 and holds only from 800.
  // Held: 0.05 -> 900, 0.1 -> 800, 0.2 -> 500, 0.4 -> 700: 0.2 is chosen.
  const std::map<double, std::vector<double>> acc = {
      {0.05, {0.5, 0.6, 0.7, 0.8, 0.85, 0.86, 0.87, 0.88, 0.90, 0.91}},
      {0.1, {0.8, 0.85, 0.90, 0.85, 0.86, 0.87, 0.88, 0.90, 0.91, 0.91}},
      {0.2, {0.7, 0.8, 0.85, 0.88, 0.90, 0.895, 0.90, 0.91, 0.90, 0.91}},
      {0.4, {0.7, 0.8, 0.85, 0.88, 0.89, 0.86, 0.90, 0.91, 0.90, 0.91}}};
  for (const auto& [lr, a] : acc) {
    const ExperimentCell tc = detail::tuning_cell(base, lr);
    size_t first = 0;
    while (a[first] < 0.9) ++first;
    write_run(spec, tc, 101, 100.0 * (first + 1), 10);
    write_evals(spec, tc, 101, a);
  }
  TuningState st = tuning_state(spec, base);
  ASSERT_TRUE(st.chosen) << st.to_json().dump();
  EXPECT_DOUBLE_EQ(*st.chosen, 0.2);
  EXPECT_EQ(st.trials[1].fresh->median, 800);
  EXPECT_EQ(st.reading, "held");
  // The same runs read by the first touch choose 0.1.
  j["tuning"].erase("reading");
  j["tuning"].erase("margin");
  EXPECT_DOUBLE_EQ(*tuning_state(experiment_spec_from_json(j, ""), base).chosen, 0.1);

  // A run without its evaluations cannot be read: the error names the file.
  fs::remove(detail::run_dir(spec, detail::tuning_cell(base, 0.4), 101) + "/evals.jsonl");
  EXPECT_CONTAINS(testing::error_of([&] { tuning_state(spec, base); }),
                  ("the \"held\" reading reads every evaluation of a run: no evaluations in"));
  EXPECT_CONTAINS(testing::error_of([&] { tuning_state(spec, base); }),
                  ("tune/lr-0.4/seed-101/evals.jsonl"));

  // "held" needs runs that go on past the target; a margin belongs to "held".
  j["base"] = base_config();
  j["tuning"]["reading"] = "held";
  EXPECT_CONTAINS(testing::error_of([&] { experiment_spec_from_json(j, ""); }),
                  ("set \"eval_mode\": \"snapshots\""));
  j["base"] = snapshots_base();
  j["tuning"]["reading"] = "first_touch";
  j["tuning"]["margin"] = 0.01;
  EXPECT_CONTAINS(testing::error_of([&] { experiment_spec_from_json(j, ""); }),
                  ("$.tuning.margin: a margin is for \"reading\": \"held\""));
}

TEST(ExperimentProtocol, AHeldReadingReadsTheFinalRunsTooWithTheFirstTouchBeside) {
  // Where the experiment reads "held", so does its report: every figure to target is the
  // evaluation's from which the run holds the target, a run that never holds it counts at
  // its budget, and the first touch is given beside.
  const std::string out = testing::temp_dir() + "/held-report";
  json j = {
      {"name", "held-report"},
      {"base", snapshots_base()},
      {"out", out},
      {"tuning",
       {{"lr", {0.05, 0.1, 0.2}}, {"seeds", {101}}, {"reading", "held"}, {"margin", 0.01}}},
      {"grid", {{"variants", {"baseline"}}, {"seeds", {1, 2}}}},
      {"cells", {{{"id", "echo"}, {"variant", "example_before"}, {"factor", 2}, {"lr", 0.1}}}}};
  ExperimentSpec spec = experiment_spec_from_json(j, "");
  ASSERT_EQ(spec.cells.size(), 2u);
  // The baseline's tuning: 0.1 holds the target from 500, the others never reach it.
  for (double lr : {0.05, 0.1, 0.2}) {
    const ExperimentCell tc = detail::tuning_cell(spec.cells[0], lr);
    if (lr == 0.1) {
      write_run(spec, tc, 101, 500, 5);
      write_evals(spec, tc, 101, {0.5, 0.6, 0.7, 0.8, 0.9, 0.91});
    } else {
      write_run(spec, tc, 101, 600, 6, /*hit=*/false);
      write_evals(spec, tc, 101, {0.5, 0.6, 0.7, 0.8, 0.85, 0.86});
    }
  }
  ExperimentCell baseline = spec.cells[0], echo = spec.cells[1];
  baseline.lr = 0.1;
  // Baseline seed 1 touches 0.9 at 300, dips below the floor, holds from 600; seed 2
  // holds from its first touch at 500.
  write_run(spec, baseline, 1, 300, 4);
  write_evals(spec, baseline, 1, {0.8, 0.85, 0.9, 0.88, 0.89, 0.9, 0.91, 0.9});
  write_run(spec, baseline, 2, 500, 6);
  write_evals(spec, baseline, 2, {0.6, 0.7, 0.8, 0.85, 0.9, 0.91, 0.9, 0.9});
  // Echo seed 1 holds from 200; seed 2 touches at 300 but its last evaluation falls below
  // the floor: it never holds, and counts at its 800 fresh examples.
  write_run(spec, echo, 1, 200, 3);
  write_evals(spec, echo, 1, {0.8, 0.9, 0.9, 0.91, 0.9, 0.9, 0.91, 0.92});
  write_run(spec, echo, 2, 300, 4);
  write_evals(spec, echo, 2, {0.8, 0.85, 0.9, 0.9, 0.91, 0.9, 0.9, 0.85});
  // write_run's budget for a run that reached the target is fresh + 100; the runs above
  // go on to 800 fresh examples, and end at 0.91 (seed 1) and 0.92 (seed 2) accuracy.
  using Run = std::pair<ExperimentCell, uint64_t>;
  for (const auto& [cell, seed] :
       std::vector<Run>{{baseline, 1}, {baseline, 2}, {echo, 1}, {echo, 2}}) {
    const std::string path = detail::run_dir(spec, cell, seed) + "/result.json";
    json r = detail::read_json_file(path);
    r["summary"]["fresh"] = 800;
    r["summary"]["wall_seconds"] = 9;
    r["summary"]["final_accuracy"] = 0.9 + 0.01 * static_cast<double>(seed);
    r["summary"]["final_loss"] = 0.3;
    detail::write_json_file(path, r);
  }
  ExperimentOptions o;
  o.plots = false;
  o.log = [](const std::string&) {};
  ExperimentReport r = report_experiment(spec, o);
  EXPECT_EQ(r.reading, "held");
  const CellResult& b = r.cells[0];
  const CellResult& e = r.cells[1];
  EXPECT_EQ(b.reached, 2);
  EXPECT_EQ(b.fresh.median, 550) << "held from 600 and 500";
  EXPECT_EQ(b.steps.median, 55);
  EXPECT_EQ(b.wall_seconds.median, 6.5) << "the held evaluations' wall clock";
  EXPECT_EQ(e.reached, 1);
  EXPECT_EQ(e.fresh.median, 200);
  ASSERT_EQ(e.fresh_observations.size(), 2u);
  EXPECT_TRUE(e.fresh_observations[1].censored);
  EXPECT_EQ(e.fresh_observations[1].value, 800) << "never held: counted at its budget";
  // Beside: the first touch, as the trainer recorded it.
  ASSERT_TRUE(b.first_touch && e.first_touch);
  EXPECT_EQ(b.first_touch->reached, 2);
  EXPECT_EQ(b.first_touch->fresh.median, 400) << "first touches at 300 and 500";
  EXPECT_EQ(e.first_touch->reached, 2);
  EXPECT_EQ(e.first_touch->fresh.median, 250);
  ASSERT_TRUE(e.first_touch->fresh_reduction);
  EXPECT_EQ(e.first_touch->fresh_reduction->ratio, 1.6) << "400 / 250";
  const std::string text = r.to_text();
  EXPECT_CONTAINS(text, "read by the first touch instead");
  EXPECT_CONTAINS(text, "margin 0.01");
  EXPECT_CONTAINS(text, "reached = holds the target");
  // The final evaluation at the budget, beside the figures to target.
  EXPECT_CONTAINS(text, "at the budget (the final evaluation): validation accuracy, loss:");
  EXPECT_DOUBLE_EQ(*b.final_accuracy.median, 0.915);
  EXPECT_EQ(b.final_loss.median, 0.3);
  EXPECT_CONTAINS(text, "0.9150 [0.9100-0.9200]");
  const json doc = detail::read_json_file(out + "/results.json");
  EXPECT_EQ(doc["reading"], "held");
  EXPECT_EQ(doc["cells"][1]["first_touch"]["reached"], 2);

  // Read by the first touch, the report is as the trainer recorded it, with nothing beside.
  j["tuning"].erase("reading");
  j["tuning"].erase("margin");
  ExperimentReport first = report_experiment(experiment_spec_from_json(j, ""), o);
  EXPECT_EQ(first.reading, "first_touch");
  EXPECT_EQ(first.cells[1].reached, 2);
  EXPECT_FALSE(first.cells[1].first_touch);
  EXPECT_EQ(first.to_text().find("read by the first touch instead"), std::string::npos);

  // A final run without its evaluations cannot be read by the rule: the error names it.
  fs::remove(detail::run_dir(spec, echo, 2) + "/evals.jsonl");
  EXPECT_CONTAINS(testing::error_of([&] { report_experiment(spec, o); }),
                  ("echo/seed-2/evals.jsonl"));
}

TEST(ExperimentProtocol, TuningHoldsALossTargetFromBelow) {
  // A language model's target is a loss: "held" reads the first evaluation at or below it
  // from which none rises above target + margin.
  json base = snapshots_base();
  base.erase("target_accuracy");
  base["target_loss"] = 2.0;
  json j = {{"name", "held-loss"},
            {"base", base},
            {"out", testing::temp_dir() + "/held-loss"},
            {"tuning",
             {{"lr", {0.05, 0.1, 0.2}}, {"seeds", {101}}, {"reading", "held"}, {"margin", 0.05}}},
            {"grid", {{"variants", {"baseline"}}, {"seeds", {1}}}}};
  ExperimentSpec spec = experiment_spec_from_json(j, "");
  const ExperimentCell& base_cell = spec.cells[0];
  // First touch: 0.05 at 200 fresh examples (then it rises to 2.3), 0.1 at 300, 0.2 at
  // 400. Held: 0.05 from 600, 0.1 from 300, 0.2 from 400: 0.1 is chosen either way but
  // 0.05 is not the first touch's winner.
  const std::map<double, std::vector<double>> loss = {
      {0.05, {2.5, 1.99, 2.3, 2.2, 2.1, 2.0, 1.95, 1.9}},
      {0.1, {2.5, 2.2, 2.0, 1.98, 2.04, 1.9, 1.9, 1.85}},
      {0.2, {2.6, 2.4, 2.1, 2.0, 1.97, 1.95, 1.94, 1.93}}};
  for (const auto& [lr, l] : loss) {
    const ExperimentCell tc = detail::tuning_cell(base_cell, lr);
    size_t first = 0;
    while (l[first] > 2.0) ++first;
    write_run(spec, tc, 101, 100.0 * (first + 1), 10);
    write_evals(spec, tc, 101, l, /*loss=*/true);
  }
  TuningState st = tuning_state(spec, base_cell);
  ASSERT_TRUE(st.chosen) << st.to_json().dump();
  EXPECT_DOUBLE_EQ(*st.chosen, 0.1);
  EXPECT_EQ(st.trials[0].fresh->median, 600);
  EXPECT_EQ(st.trials[1].fresh->median, 300);
  EXPECT_EQ(st.trials[2].fresh->median, 400);
  // Read by the first touch, 0.05 (200) wins: at the edge of the list, so it widens.
  j["tuning"].erase("reading");
  j["tuning"].erase("margin");
  EXPECT_EQ(tuning_state(experiment_spec_from_json(j, ""), base_cell).trials[1].fresh->median, 200);
}

TEST(ExperimentProtocol, ALossTargetsPlotIsTheLossAgainstFreshExamples) {
  // A language model's plot shows what its target reads: the loss, with the target's line.
  const std::string out = testing::temp_dir() + "/loss-plot";
  json base = snapshots_base();
  base.erase("target_accuracy");
  base["target_loss"] = 2.0;
  json j = {{"name", "loss-plot"},
            {"base", base},
            {"out", out},
            {"grid", {{"variants", {"baseline"}}, {"seeds", {1}}}}};
  ExperimentSpec spec = experiment_spec_from_json(j, "");
  write_run(spec, spec.cells[0], 1, 300, 10);
  write_evals(spec, spec.cells[0], 1, {2.5, 2.2, 1.98, 1.9}, /*loss=*/true);
  ExperimentOptions o;
  o.plots = true;
  run_experiment(spec, o);
  std::ifstream gp_in(out + "/plots/plots.gp");
  const std::string gp((std::istreambuf_iterator<char>(gp_in)), std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(gp, "set output \"loss_vs_fresh.\".fmt");
  EXPECT_CONTAINS(gp, "\"loss_vs_fresh.dat\" index 0 using 1:3 with linespoints");
  EXPECT_CONTAINS(gp, "  2 with lines dt 2 lc rgb \"gray\" title \"target\"");
  EXPECT_EQ(gp.find("accuracy_vs_fresh"), std::string::npos);
  // The data file has fresh examples, accuracy and loss per evaluation.
  std::ifstream dat(out + "/plots/loss_vs_fresh.dat");
  std::string line;
  std::getline(dat, line);  // the series' title
  std::getline(dat, line);
  EXPECT_EQ(line, "100 0 2.5");
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0)
    EXPECT_TRUE(fs::exists(out + "/plots/loss_vs_fresh.png"));
}

TEST(ExperimentProtocol, ATuningGroupRunsOnlyItsWinnersFinalSeeds) {
  const std::string out = testing::temp_dir() + "/groups";
  json j = {{"name", "groups"},
            {"base", base_config()},
            {"out", out},
            {"tuning",
             {{"lr", {0.1, 0.2, 0.4}},
              {"seeds", {101, 102}},
              {"groups", {{"baseline", {"baseline", "baseline-wd1e-3"}}}}}},
            {"grid", {{"variants", {"baseline"}}, {"seeds", {1, 2}}}},
            {"cells",
             {{{"id", "baseline-wd1e-3"},
               {"variant", "baseline"},
               {"overrides", {{"optimizer", {{"weight_decay", 1e-3}}}}}},
              {{"id", "fixed"}, {"variant", "baseline"}, {"lr", 0.3}}}}};
  ExperimentSpec spec = experiment_spec_from_json(j, "");
  ASSERT_EQ(spec.cells.size(), 3u);
  EXPECT_EQ(tuning_group_of(spec, "baseline-wd1e-3"), "baseline");
  EXPECT_EQ(tuning_group_of(spec, "fixed"), "");
  EXPECT_FALSE(tuning_group_winner(spec, "baseline")) << "nothing tuned yet";
  // Both members choose 0.2; the weight decay of 1e-3 needs fewer fresh examples there.
  for (uint64_t s : {101, 102}) {
    for (double lr : {0.1, 0.2, 0.4}) {
      write_run(spec, detail::tuning_cell(spec.cells[0], lr), s, lr == 0.2 ? 500 : 900, 10);
      write_run(spec, detail::tuning_cell(spec.cells[1], lr), s, lr == 0.2 ? 400 : 900, 10);
    }
  }
  EXPECT_EQ(tuning_group_winner(spec, "baseline"), "baseline-wd1e-3");
  // The cell with its own rate is not tuned.
  TuningState fixed = tuning_state(spec, spec.cells[2]);
  EXPECT_EQ(fixed.chosen, 0.3);
  EXPECT_TRUE(fixed.trials.empty() && fixed.pending.empty());

  // The winner's and the fixed cell's final runs are on disk: the sweep trains nothing,
  // and the member that lost has no final runs.
  ExperimentCell winner = spec.cells[1], fixed_cell = spec.cells[2];
  winner.lr = 0.2;
  for (uint64_t s : {1, 2}) {
    write_run(spec, winner, s, 450, 10);
    write_run(spec, fixed_cell, s, 700, 10);
  }
  ExperimentOptions o;
  o.plots = false;
  std::vector<std::string> log;
  o.log = [&](const std::string& line) { log.push_back(line); };
  ExperimentReport r = run_experiment(spec, o);
  EXPECT_EQ(r.runs_trained, 0);
  EXPECT_EQ(r.runs_failed, 0);
  EXPECT_EQ(final_run_count(spec), 4) << "the group's 2 seeds once, and the fixed cell's 2";
  EXPECT_EQ(r.runs_total, 4);
  EXPECT_EQ(r.cells[0].status, "not_chosen");
  EXPECT_EQ(r.cells[1].status, "done");
  EXPECT_EQ(r.cells[2].status, "done");
  EXPECT_NE(r.cells[0].tuning->note.find("tuning group baseline chose baseline-wd1e-3"),
            std::string::npos)
      << r.cells[0].tuning->note;
  bool said = false;
  for (const auto& line : log)
    said = said || line.find("not chosen in tuning group baseline (baseline-wd1e-3 is)") !=
                       std::string::npos;
  EXPECT_TRUE(said);

  // With the winner's seed 2 gone, the progress counts that one run: the member that lost
  // and the finished runs of the later cell are not runs left.
  fs::remove_all(detail::run_dir(spec, winner, 2));
  o.dry_run = true;
  log.clear();
  run_experiment(spec, o);
  std::vector<std::string> heads;
  for (const auto& line : log)
    if (line.rfind("[cell ", 0) == 0) heads.push_back(line.substr(0, line.find(" | ETA")));
  EXPECT_EQ(heads,
            std::vector<std::string>{"[cell 2/3] baseline-wd1e-3 seed 2 | run 1/1 of this sweep"});

  // Groups name cells that exist, once each, none with its own rate.
  auto refused = [&](json groups) {
    json k = j;
    k["tuning"]["groups"] = groups;
    return testing::error_of([&] { experiment_spec_from_json(k, ""); });
  };
  EXPECT_CONTAINS(refused({{"g", {"baseline", "nope"}}}), ("tuning group g: no cell 'nope'"));
  EXPECT_CONTAINS(refused({{"g", {"baseline", "fixed"}}}), ("cell fixed has its own rate"));
  EXPECT_CONTAINS(refused({{"g", {"baseline", "baseline-wd1e-3"}}, {"h", {"baseline", "fixed"}}}),
                  ("in tuning groups"));
  EXPECT_CONTAINS(refused({{"g", {"baseline"}}}), ("at least 2 cell ids"));
}

}  // namespace
TEST(ExperimentProtocol, EachRunHasADataServiceJobOfItsOwn) {
  json base = base_config();
  base["train_spec"]["source"] = json::parse(R"({"kind": "service", "dispatcher": "127.0.0.1:9",
    "job": "eos", "pipeline": {"source": {"kind": "range", "count": 100}}})");
  json j = {{"name", "service"},
            {"base", base},
            {"out", testing::temp_dir() + "/service"},
            {"grid", {{"variants", {"baseline"}}, {"seeds", {1, 2}}}}};
  const ExperimentSpec spec = experiment_spec_from_json(j, "");
  ASSERT_EQ(spec.cells.size(), 1u);
  std::set<std::string> jobs;
  for (uint64_t seed : {1, 2}) {
    const TrainConfig c =
        detail::cell_config(spec, spec.cells[0], seed, ExperimentOptions{}, nullptr);
    jobs.insert(c.train_spec->to_json()["source"]["job"].get<std::string>());
  }
  EXPECT_EQ(jobs,
            (std::set<std::string>{"eos/cells/baseline/seed-1", "eos/cells/baseline/seed-2"}));
}

TEST(ExperimentProtocol, TuneOnlyRunsNoFinalSeed) {
  const std::string out = testing::temp_dir() + "/tune_only";
  ExperimentSpec spec = make_spec(out, {{"lr", {0.05, 0.1, 0.2}}, {"seeds", {101}}});
  for (const ExperimentCell& cell : spec.cells)
    for (double lr : {0.05, 0.1, 0.2})
      write_run(spec, detail::tuning_cell(cell, lr), 101, lr == 0.1 ? 500 : 900, 10);
  ExperimentOptions o;
  o.plots = false;
  o.tune_only = true;
  o.log = [](const std::string&) {};
  const ExperimentReport r = run_experiment(spec, o);
  EXPECT_EQ(r.runs_trained, 0);
  EXPECT_EQ(r.runs_failed, 0);
  for (const ExperimentCell& cell : spec.cells) {
    EXPECT_DOUBLE_EQ(*tuning_state(spec, cell).chosen, 0.1);
    EXPECT_FALSE(fs::exists(detail::run_dir(spec, cell, 1)));
  }
}

TEST(ExperimentProtocol, AnAdaptiveCellCanHaveItsCapTuned) {
  json j = {{"name", "auto"},
            {"base", base_config()},
            {"out", testing::temp_dir() + "/auto"},
            {"cells",
             {{{"variant", "adaptive"}, {"factor", 4}, {"shuffle_after_echo", 100}, {"seeds", {1}}},
              {{"variant", "adaptive"},
               {"factor", 4},
               {"shuffle_after_echo", 100},
               {"adaptive_factor", "auto"},
               {"seeds", {1}}}}}};
  const ExperimentSpec spec = experiment_spec_from_json(j, "");
  ASSERT_EQ(spec.cells.size(), 2u);
  EXPECT_EQ(spec.cells[0].id, "adaptive-m4-sb100");
  EXPECT_EQ(spec.cells[1].id, "auto-m4-sb100");
  const json plain = derive_cell_spec(base_config()["train_spec"], spec.cells[0]);
  const json tuned = derive_cell_spec(base_config()["train_spec"], spec.cells[1]);
  EXPECT_EQ(plain["stages"][2]["factor"], "adaptive");
  EXPECT_EQ(tuned["stages"][2]["factor"], "auto");
  EXPECT_EQ(tuned["stages"][2]["max_factor"], 4);
  j["cells"][1]["adaptive_factor"] = "tuned";
  EXPECT_THROW(experiment_spec_from_json(j, ""), Error);
}

}  // namespace dataecho::train
