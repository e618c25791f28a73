// The trainer on real data (Fashion-MNIST from Debian) with real LibTorch training.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "dataecho/core/allocator.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/spec/echo_advice.h"
#include "dataecho/spec/registry.h"
#include "dataecho/train/memory_pipeline.h"
#include "dataecho/train/profile.h"
#include "dataecho/train/trainer.h"
#include "fashion_data.h"
#include "test_util.h"

namespace dataecho::train {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using dataecho::testing::fashion;

bool has_stage(const std::string& op) { return registry().stages.count(op) > 0; }

// MLP on the first `train_n` training images, evaluated on the first `eval_n` test images.
TrainConfig fashion_config(int64_t train_n, int64_t eval_n, json stages, uint64_t seed = 1) {
  TrainConfig c;
  auto train = fashion(true, train_n);
  c.train_pipeline = [train, stages, seed] { return build_memory_pipeline(train, stages, seed); };
  if (eval_n > 0) {
    auto eval = fashion(false, eval_n);
    c.eval_pipeline = [eval] {
      return build_memory_pipeline(eval, json::parse(R"([{"op":"batch","size":1000}])"));
    };
  }
  c.model.kind = "mlp";
  c.model.width = 128;
  c.optimizer.lr = 0.05;
  c.seed = seed;
  c.progress = "off";
  c.threads = 1;
  return c;
}

json epochs_stages(int64_t shuffle, int64_t batch) {
  return json::array({{{"op", "repeat"}, {"count", -1}},
                      {{"op", "shuffle"}, {"buffer", shuffle}},
                      {{"op", "batch"}, {"size", batch}}});
}

// The first node whose label's op starts with `op` ("2:echo", "2:echo(adaptive)").
const json* node_named(const json& stats, const std::string& op) {
  for (const auto& n : stats) {
    std::string name = n["name"].get<std::string>();
    if (name.find(":" + op) != std::string::npos) return &n;
  }
  return nullptr;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dataecho::testing::fashion_available())
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
};

TEST_F(TrainerTest, MlpReaches70PercentOnFashionMnistWithinAStepBudget) {
  TrainConfig c = fashion_config(2000, 10000, epochs_stages(2000, 64));
  if (registry().sources.count("idx")) {
    // The real thing: the idx source over Debian's files, through the spec builder.
    std::string dir = dataecho::testing::kFashionDir;
    c.train_pipeline = nullptr;
    c.eval_pipeline = nullptr;
    c.train_spec = PipelineDef::from_json({{"seed", 3},
                                           {"source",
                                            {{"kind", "idx"},
                                             {"images", dir + "/train-images-idx3-ubyte.gz"},
                                             {"labels", dir + "/train-labels-idx1-ubyte.gz"},
                                             {"limit", 2000}}},
                                           {"stages", epochs_stages(2000, 64)}});
    c.eval_spec =
        PipelineDef::from_json({{"source",
                                 {{"kind", "idx"},
                                  {"images", dir + "/t10k-images-idx3-ubyte.gz"},
                                  {"labels", dir + "/t10k-labels-idx1-ubyte.gz"}}},
                                {"stages", json::parse(R"([{"op":"batch","size":1000}])")}});
  }
  c.threads = 2;
  c.target_accuracy = 0.70;
  c.eval_every = 40;
  // A step budget, not a time limit: how fast the machine is must not decide the test.
  c.max_steps = 3000;
  c.out = dataecho::testing::temp_dir() + "/mlp";
  Trainer trainer(c);
  TrainResult r = trainer.run();
  ASSERT_TRUE(r.reached_target) << "final accuracy "
                                << (r.final_eval ? r.final_eval->accuracy : -1);
  EXPECT_EQ(r.stop_reason, "target");
  EXPECT_GE(r.final_eval->accuracy, 0.70);
  EXPECT_EQ(r.final_eval->examples, 10000);
  EXPECT_GT(*r.wall_seconds_to_target, 0.0);
  EXPECT_EQ(*r.steps_to_target, r.steps);
  EXPECT_EQ(r.fresh, r.steps * 64);  // no echo: every row is fresh
  EXPECT_EQ(r.echoed, 0);
  EXPECT_GT(r.compute_seconds, 0);
  // Training-side time: start-up (building the pipeline, the first batch), then the steps.
  EXPECT_NEAR(r.train_seconds, r.startup_seconds + r.wait_seconds + r.compute_seconds,
              0.05 * r.train_seconds + 0.05);
  // The run's peak RSS (Linux): at least the 10,000 evaluation images it holds as floats.
  ASSERT_TRUE(r.peak_rss_mib.has_value());
  EXPECT_GT(*r.peak_rss_mib, 10000.0 * 784 * 4 / (1 << 20));

  // Outputs: one evals.jsonl line per evaluation, summary.json, config.json, checkpoint.
  std::ifstream evals(c.out + "/evals.jsonl");
  std::string line;
  size_t lines = 0;
  while (std::getline(evals, line)) {
    json e = json::parse(line);
    EXPECT_EQ(e["step"].get<int64_t>(), r.evals[lines].step);
    ++lines;
  }
  EXPECT_EQ(lines, r.evals.size());
  json summary = json::parse(std::ifstream(c.out + "/summary.json"));
  EXPECT_EQ(summary["fresh"].get<int64_t>(), r.fresh);
  EXPECT_EQ(summary["stop_reason"], "target");
  EXPECT_TRUE(fs::exists(c.out + "/config.json"));
  EXPECT_TRUE(fs::exists(c.out + "/checkpoint/model.pt"));
  EXPECT_TRUE(fs::exists(c.out + "/checkpoint/optimizer.pt"));
}

// The trainer's own bookkeeping must not grow the heap step after step. Its set of
// (id, epoch) pairs once did: a node per pair, allocated between the steps' large
// LibTorch buffers, split them in the heap (kept there by tune_allocator_for_pipelines,
// as the dataecho tool runs), and peak RSS grew by about 2 MiB a step, 1.5 GiB here.
TEST_F(TrainerTest, PeakMemoryDoesNotGrowWithTheNumberOfSteps) {
  tune_allocator_for_pipelines();  // as the dataecho tool does
  auto run = [](int64_t steps) {
    // As the protocol's runs: normalized in the pipeline, batched on its threads.
    const std::string dir = dataecho::testing::kFashionDir;
    TrainConfig c;
    c.progress = "off";
    c.optimizer.lr = 0.05;
    c.train_spec =
        PipelineDef::from_json({{"source",
                                 {{"kind", "idx"},
                                  {"images", dir + "/train-images-idx3-ubyte.gz"},
                                  {"labels", dir + "/train-labels-idx1-ubyte.gz"},
                                  {"limit", 5000}}},
                                {"stages", json::array({{{"op", "repeat"}, {"count", -1}},
                                                        {{"op", "shuffle"}, {"buffer", 1000}},
                                                        {{"op", "map"}, {"fn", "normalize"}},
                                                        {{"op", "batch"}, {"size", 128}},
                                                        {{"op", "prefetch"}, {"buffer", 4}}})}});
    c.model.kind = "cnn";
    c.model.depth = 2;
    c.model.width = 16;
    c.max_steps = steps;
    c.eval_every = 0;
    TrainResult r = Trainer(c).run();
    EXPECT_EQ(r.steps, steps);
    return r.peak_rss_mib.value_or(0);
  };
  const double short_run = run(100);
  const double long_run = run(600);
  if (short_run == 0) GTEST_SKIP() << "no VmHWM in /proc/self/status";
  EXPECT_LT(long_run - short_run, 64)
      << "peak RSS " << short_run << " MiB after 100 steps, " << long_run << " MiB after 600";
}

// Trains to the end of a finite pipeline and returns the result.
TrainResult train_to_end(const json& stages, int64_t n = 600) {
  TrainConfig c = fashion_config(n, 0, stages);
  c.eval_every = 0;
  return Trainer(c).run();
}

TEST_F(TrainerTest, CountsEqualThePipelinesCountersWithFixedExampleEcho) {
  if (!has_stage("echo")) GTEST_SKIP() << "echo op not built in";
  TrainResult r =
      train_to_end(json::parse(R"([{"op":"echo","factor":2.5},{"op":"shuffle","buffer":300},
                                                {"op":"batch","size":50}])"));
  EXPECT_EQ(r.stop_reason, "end_of_data");
  const json* echo = node_named(r.pipeline_stats, "echo");
  ASSERT_NE(echo, nullptr) << r.pipeline_stats.dump();
  EXPECT_EQ(r.fresh, 600);
  EXPECT_EQ(r.fresh, echo->at("counters").at("fresh").get<int64_t>());
  EXPECT_EQ(r.echoed, echo->at("counters").at("echoed").get<int64_t>());
  EXPECT_GT(r.echoed, 600);
  EXPECT_NEAR(r.achieved_echo, 2.5, 0.25);
}

TEST_F(TrainerTest, CountsEqualThePipelinesCountersWithBatchEcho) {
  if (!has_stage("echo")) GTEST_SKIP() << "echo op not built in";
  TrainResult r =
      train_to_end(json::parse(R"([{"op":"batch","size":50},{"op":"echo","factor":2}])"));
  const json* echo = node_named(r.pipeline_stats, "echo");
  ASSERT_NE(echo, nullptr);
  EXPECT_EQ(r.fresh, 600);
  EXPECT_EQ(r.echoed, 600);
  EXPECT_EQ(r.steps, 24);
  EXPECT_EQ(r.fresh, echo->at("counters").at("fresh").get<int64_t>());
  EXPECT_EQ(r.echoed, echo->at("counters").at("echoed").get<int64_t>());
}

TEST_F(TrainerTest, CountsEqualThePipelinesCountersWithAdaptiveEcho) {
  if (!has_stage("echo")) GTEST_SKIP() << "echo op not built in";
  // A slow upstream (1 ms per example): the adaptive echo fills in with repeats.
  TrainResult r = train_to_end(json::parse(R"([{"op":"map","fn":"sleep","args":{"ms":1}},
                                                {"op":"echo","factor":"adaptive","max_factor":4},
                                                {"op":"batch","size":50}])"),
                               400);
  const json* echo = node_named(r.pipeline_stats, "echo");
  ASSERT_NE(echo, nullptr);
  EXPECT_EQ(r.fresh, 400);
  EXPECT_EQ(r.fresh, echo->at("counters").at("fresh").get<int64_t>());
  EXPECT_EQ(r.echoed, echo->at("counters").at("echoed").get<int64_t>());
  EXPECT_GT(r.echoed, 0);
}

// eval_every_fresh: an evaluation each time another 200 fresh examples have been read,
// with and without echo, so that runs with different echo factors evaluate equally often
// per fresh example.
TEST_F(TrainerTest, EvaluatesEveryNFreshExamples) {
  if (!has_stage("echo")) GTEST_SKIP() << "echo op not built in";
  for (const char* stages : {R"([{"op":"batch","size":50}])",
                             R"([{"op":"echo","factor":3},{"op":"batch","size":50}])"}) {
    TrainConfig c = fashion_config(600, 200, json::parse(stages));
    c.eval_every = 0;
    c.eval_every_fresh = 200;
    c.eval_at_end = false;
    TrainResult r = Trainer(c).run();
    EXPECT_EQ(r.fresh, 600) << stages;
    ASSERT_EQ(r.evals.size(), 3u) << stages;
    for (size_t i = 0; i < r.evals.size(); ++i) {
      // Evaluated at the first step whose batch took the fresh count past 200 (i + 1).
      EXPECT_GE(r.evals[i].fresh, 200 * static_cast<int64_t>(i + 1)) << stages;
      EXPECT_LT(r.evals[i].fresh, 200 * static_cast<int64_t>(i + 1) + 50) << stages;
    }
  }
}

// Fresh examples are distinct (id, epoch) pairs trained on, not rows with echo index 0:
// with a shuffle after a 4x echo, most ids are first trained on through a copy.
TEST_F(TrainerTest, FreshCountsDistinctReadsNotEchoIndices) {
  if (!has_stage("echo")) GTEST_SKIP() << "echo op not built in";
  TrainConfig c = fashion_config(
      1000, 0, json::parse(R"([{"op":"echo","factor":4},{"op":"shuffle","buffer":4000},
                      {"op":"batch","size":100}])"));
  c.eval_every = 0;
  c.max_steps = 10;
  // What the first 10 batches hold, read independently of the trainer.
  std::set<int64_t> ids;
  int64_t echo0 = 0;
  {
    auto p = c.train_pipeline();
    for (int i = 0; i < 10; ++i) {
      auto b = p->next();
      ASSERT_TRUE(b.has_value());
      for (size_t k = 0; k < b->num_rows(); ++k) {
        ids.insert(b->row(k).id);
        echo0 += b->row(k).echo == 0;
      }
    }
  }
  TrainResult r = Trainer(c).run();
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(r.fresh, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(r.fresh + r.echoed, 1000);
  EXPECT_EQ(r.fresh_by_echo_index, echo0);
  EXPECT_GT(r.fresh, r.fresh_by_echo_index + 200);  // about 680 against 250
  EXPECT_GE(r.raw_reads, r.fresh);                  // the shuffle read all 1,000 ahead
  EXPECT_EQ(r.raw_reads, 1000);
}

// A re-read in a later epoch is fresh again: (id, epoch), stamped by repeat.
TEST_F(TrainerTest, FreshCountsEveryEpochsReRead) {
  TrainConfig c = fashion_config(100, 0, epochs_stages(100, 50));
  c.eval_every = 0;
  c.max_steps = 6;  // three epochs of 100
  TrainResult r = Trainer(c).run();
  EXPECT_EQ(r.fresh, 300);
  EXPECT_EQ(r.echoed, 0);
}

// The training clock starts when the pipeline is built: filling a shuffle buffer behind
// a slow stage (150 x 2 ms) is part of the time to target.
TEST_F(TrainerTest, TrainingClockIncludesStartUp) {
  TrainConfig c =
      fashion_config(300, 200, json::parse(R"([{"op":"map","fn":"sleep","args":{"ms":2}},
                      {"op":"shuffle","buffer":150},{"op":"batch","size":10}])"));
  c.eval_every = 1;
  c.target_accuracy = 0.0;  // met at the first evaluation
  TrainResult r = Trainer(c).run();
  ASSERT_TRUE(r.reached_target);
  EXPECT_EQ(*r.steps_to_target, 1);
  EXPECT_GE(r.startup_seconds, 0.3);
  EXPECT_GE(*r.seconds_to_target, r.startup_seconds);
  EXPECT_GE(r.train_seconds, r.startup_seconds + r.wait_seconds + r.compute_seconds - 1e-6);
  EXPECT_GE(*r.wall_seconds_to_target, r.startup_seconds);
}

// eval_mode "snapshots": the same evaluations as inline (same steps, counts, accuracy),
// but computed after training, off the clock; the run goes on to its budget and the
// time to target is the clock when the first snapshot that meets it was taken.
TEST_F(TrainerTest, SnapshotEvaluationEqualsInlineOffTheClock) {
  TrainConfig c = fashion_config(2000, 1000, epochs_stages(500, 64));
  c.eval_every = 10;
  c.max_steps = 50;
  c.eval_at_end = false;
  TrainResult inline_run = Trainer(c).run();
  ASSERT_EQ(inline_run.evals.size(), 5u);
  // A target first met at the third evaluation or later.
  size_t first = 2;
  while (first < 5 &&
         inline_run.evals[first].accuracy <
             std::max(inline_run.evals[0].accuracy, inline_run.evals[1].accuracy) + 1e-9)
    ++first;
  ASSERT_LT(first, 5u) << "accuracy did not rise past the first two evaluations";
  const double target = inline_run.evals[first].accuracy;

  for (bool to_disk : {false, true}) {
    TrainConfig s = c;
    s.eval_mode = "snapshots";
    s.target_accuracy = target;
    if (to_disk) s.out = dataecho::testing::temp_dir() + "/snapshots";
    TrainResult r = Trainer(s).run();
    EXPECT_EQ(r.steps, 50) << "a snapshot run trains on to its budget";
    ASSERT_EQ(r.evals.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r.evals[i].step, inline_run.evals[i].step);
      EXPECT_EQ(r.evals[i].fresh, inline_run.evals[i].fresh);
      EXPECT_DOUBLE_EQ(r.evals[i].accuracy, inline_run.evals[i].accuracy) << i;
    }
    ASSERT_TRUE(r.reached_target);
    EXPECT_EQ(r.stop_reason, "target");
    EXPECT_EQ(*r.steps_to_target, r.evals[first].step);
    EXPECT_DOUBLE_EQ(*r.seconds_to_target, r.evals[first].train_seconds);
    EXPECT_LT(*r.seconds_to_target, r.train_seconds);
    EXPECT_GT(r.eval_seconds, 0);
    EXPECT_GT(r.snapshot_seconds, 0);
    if (to_disk) {
      EXPECT_FALSE(fs::exists(s.out + "/snapshots")) << "evaluated snapshots are removed";
      json summary = json::parse(std::ifstream(s.out + "/summary.json"));
      EXPECT_EQ(summary["eval_mode"], "snapshots");
    }
  }
}

// The held-out test set is evaluated once, on the model that first met the target (or
// on the final model when none did), apart from the evaluations against the target.
TEST_F(TrainerTest, TestSetIsEvaluatedOnceOnTheModelAtTheTarget) {
  auto test = fashion(false, 1000);
  for (bool reachable : {true, false}) {
    TrainConfig c = fashion_config(2000, 300, epochs_stages(500, 64));
    c.test_pipeline = [test] {
      return build_memory_pipeline(test, json::parse(R"([{"op":"batch","size":500}])"));
    };
    c.eval_every = 10;
    c.max_steps = 60;
    c.target_accuracy = reachable ? 0.3 : 0.999;
    TrainResult r = Trainer(c).run();
    ASSERT_TRUE(r.test_eval.has_value());
    EXPECT_EQ(r.test_eval->examples, 1000);
    EXPECT_GT(r.test_eval->accuracy, 0.1);
    if (reachable) {
      ASSERT_TRUE(r.reached_target);
      EXPECT_EQ(r.test_model, "target");
      EXPECT_EQ(r.test_eval->step, *r.steps_to_target);
      EXPECT_EQ(r.steps, *r.steps_to_target);
    } else {
      EXPECT_EQ(r.test_model, "final");
      EXPECT_EQ(r.test_eval->step, 60);
    }
    json summary = r.to_json();
    EXPECT_TRUE(summary["test_accuracy"].is_number());
  }
}

TEST_F(TrainerTest, SameSeedGivesIdenticalLossesWithOneThread) {
  auto run = [](uint64_t seed) {
    TrainConfig c = fashion_config(1000, 0, epochs_stages(500, 32), seed);
    c.max_steps = 60;
    c.eval_every = 0;
    return Trainer(c).run().losses;
  };
  std::vector<float> a = run(3), b = run(3), other = run(4);
  ASSERT_EQ(a.size(), 60u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
}

TEST_F(TrainerTest, CpuSplitPinsTheRunAndIsUndoneAfterIt) {
  std::vector<int> all = allowed_cpus();
  if (all.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto run = [&](int split, const std::string& out) {
    TrainConfig c = fashion_config(1000, 0, epochs_stages(500, 32), 3);
    c.max_steps = 30;
    c.eval_every = 0;
    c.cpu_split = split;
    c.out = out;
    return Trainer(c).run();
  };
  std::string dir = dataecho::testing::temp_dir();
  TrainResult plain = run(0, dir + "/plain"), split = run(1, dir + "/split");
  EXPECT_EQ(split.losses, plain.losses) << "the split changes where, not what";
  EXPECT_EQ(split.train_cpus, (std::vector<int>{all.front()}));
  EXPECT_EQ(split.pipeline_cpus, std::vector<int>(all.begin() + 1, all.end()));
  EXPECT_EQ(allowed_cpus(), all) << "the thread's CPUs are restored";
  EXPECT_TRUE(engine_cpus().empty()) << "and the engine's set cleared";
  json summary = json::parse(std::ifstream(dir + "/split/summary.json"));
  EXPECT_EQ(summary["cpu_split"]["train"], json(split.train_cpus));
  EXPECT_EQ(summary["cpu_split"]["pipeline"], json(split.pipeline_cpus));
  EXPECT_FALSE(json::parse(std::ifstream(dir + "/plain/summary.json")).contains("cpu_split"));
  // CPU time of the run: more than nothing, at most the wall time on every allowed CPU.
  EXPECT_GT(split.cpu_seconds, 0);
  EXPECT_LE(split.cpu_seconds, split.wall_seconds * static_cast<double>(all.size()) + 0.1);
  EXPECT_EQ(summary["cpu_seconds"].get<double>(), split.cpu_seconds);
  EXPECT_CONTAINS(dataecho::testing::error_of([&] { run(static_cast<int>(all.size()), ""); }),
                  ("--cpu-split " + std::to_string(all.size()) + " needs between 1 and"));
  EXPECT_CONTAINS(dataecho::testing::error_of([&] {
                    TrainConfig c = fashion_config(200, 0, epochs_stages(100, 32), 3);
                    c.cpu_split = 1;
                    c.threads = 2;
                    Trainer(c).run();
                  }),
                  ("threads 2 > cpu_split 1: LibTorch's threads would share the step's 1 CPU(s)"));
}

TEST_F(TrainerTest, BadConfigsFailBeforeTrainingWithAClearMessage) {
  std::string out = dataecho::testing::temp_dir() + "/bad";
  auto failure = [&](const std::function<void(TrainConfig&)>& edit) {
    TrainConfig c = fashion_config(200, 200, epochs_stages(100, 32));
    c.out = out;
    c.max_steps = 5;
    edit(c);
    std::string message = dataecho::testing::error_of([&] { Trainer(c).run(); });
    EXPECT_FALSE(fs::exists(out + "/checkpoint")) << message;
    return message;
  };
  EXPECT_CONTAINS(failure([](TrainConfig& c) { c.model.kind = "vgg"; }),
                  ("unknown model \"vgg\" (known: mlp, cnn, resnet, transformer)"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) { c.target_accuracy = 1.5; }),
                  ("target accuracy must be in [0, 1], got 1.5"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) { c.target_accuracy = -0.1; }), ("[0, 1]"));
  EXPECT_CONTAINS(
      failure([](TrainConfig& c) { c.input.image_field = "pixels"; }),
      ("training pipeline: batches have no image field \"pixels\" (fields: image, label)"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) { c.input.label_field = "class"; }),
                  ("no label field \"class\""));
  EXPECT_CONTAINS(failure([](TrainConfig& c) { c.model.in_channels = 3; }),
                  ("the model takes 3-channel images but the data has 1 channels"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) { c.model.num_classes = 5; }),
                  ("is outside [0, 5); set model.num_classes"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) {
                    c.model.kind = "resnet";
                    c.model.depth = 10;
                  }),
                  ("resnet depth must be 6n+2"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) {
                    auto train = fashion(true, 200);
                    c.train_pipeline = [train] {
                      return build_memory_pipeline(train, json::array());
                    };
                  }),
                  ("not batches: end the spec with a \"batch\" stage"));
  EXPECT_CONTAINS(failure([](TrainConfig& c) {
                    c.eval_pipeline = nullptr;
                    c.target_accuracy = 0.5;
                  }),
                  ("a target needs an evaluation pipeline"));
  EXPECT_CONTAINS(
      failure([](TrainConfig& c) {
        // Evaluation images of another shape than the training images.
        std::vector<Example> small;
        for (int i = 0; i < 4; ++i) {
          Example e(i);
          e.set("image", Tensor::from_vector(std::vector<uint8_t>(14 * 14), {14, 14, 1}));
          e.set("label", Tensor::scalar<int64_t>(0));
          small.push_back(e);
        }
        auto data = std::make_shared<const std::vector<Example>>(small);
        c.eval_pipeline = [data] {
          return build_memory_pipeline(data, json::parse(R"([{"op":"batch","size":2}])"));
        };
      }),
      ("evaluation pipeline: its batches are uint8 [14, 14, 1]"));
}

TEST(TrainConfigTest, JsonConfigIsValidatedWithPaths) {
  EXPECT_CONTAINS(dataecho::testing::error_of([] {
                    train_config_from_json(json::parse(R"({"model":{"kind":"mlp","widht":3}})"));
                  }),
                  ("$.model.widht"));
  EXPECT_CONTAINS(dataecho::testing::error_of(
                      [] { train_config_from_json(json::parse(R"({"max_steps":"ten"})")); }),
                  ("$.max_steps"));
  TrainConfig c = train_config_from_json(json::parse(R"({
      "train_spec": {"source": {"kind": "range", "count": 4}},
      "model": {"kind": "resnet", "depth": 32, "width": 16},
      "optimizer": {"lr": 0.2, "warmup_steps": 5, "decay_steps": 100},
      "target_accuracy": 0.9, "max_fresh": 1000, "threads": 2, "seed": 9, "out": "runs/a", "eval_every": 7})"),
                                         "/base");
  EXPECT_EQ(c.model.kind, "resnet");
  EXPECT_EQ(c.model.resolved_depth(), 32);
  EXPECT_EQ(c.optimizer.lr, 0.2);
  EXPECT_EQ(*c.target_accuracy, 0.9);
  EXPECT_EQ(c.max_fresh, 1000);
  EXPECT_EQ(c.out, "runs/a");
  ASSERT_TRUE(c.train_spec);
  EXPECT_EQ(c.train_spec->source_options()["count"], 4);
  EXPECT_CONTAINS(dataecho::testing::error_of([&] {
                    c.target_accuracy = 2;
                    validate_train_config(c);
                  }),
                  ("target accuracy must be in [0, 1], got 2"));
}

TEST(LearningRateTest, LinearWarmupThenLinearDecay) {
  OptimizerConfig o;
  o.lr = 1.0;
  o.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 0, 0), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 3, 0), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 50, 0), 1.0);  // no decay budget: constant
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 4, 14), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 9, 14), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 14, 14), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 20, 14), 0.0);
  o.final_lr_fraction = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 14, 14), 0.1);
}

TEST_F(TrainerTest, ProfileFindsTheSlowStageAndRecommendsEcho) {
  ProfileOptions o;
  auto data = fashion(true, 400);
  // 8 ms per example upstream, 32 per batch (256 ms): far slower than an MLP step, even
  // on a loaded machine (R is about 1.8 there with 4 ms).
  o.train_pipeline = [data] {
    return build_memory_pipeline(data, json::parse(R"([{"op":"map","fn":"sleep","args":{"ms":8}},
                                                       {"op":"batch","size":32}])"));
  };
  o.pipeline_seconds = 1;
  o.train_steps = 10;
  ProfileReport r = run_profile(o);
  EXPECT_EQ(r.slowest_stage, "1:map(sleep)");
  EXPECT_GT(r.upstream_ms_per_batch, 200);
  EXPECT_GT(r.r, 1.1);
  // About R, at most the largest factor the experiments show to pay.
  EXPECT_DOUBLE_EQ(r.recommended_factor, std::min(kLargestFactorShown, std::round(r.r * 10) / 10));
  EXPECT_EQ(r.factor_capped, r.r > kLargestFactorShown);
  EXPECT_CONTAINS(r.placement, ("right after 1:map(sleep)"));
  EXPECT_CONTAINS(r.to_text(), ("<- bottleneck"));
  // Per stage: time per element, share of the wall-clock time, the bottleneck flag.
  const json& sleep = r.stages[1];
  EXPECT_TRUE(sleep["bottleneck"].get<bool>());
  EXPECT_FALSE(r.stages[2]["bottleneck"].get<bool>());
  EXPECT_GT(sleep["ms_per_element"].get<double>(), 7.5);  // sleeps 8 ms per example
  EXPECT_GT(sleep["wall_share"].get<double>(), 0.8);
  EXPECT_LE(sleep["wall_share"].get<double>(), 1.05);
  // What to change, with the numbers: more threads for the map (8 ms x 32 per batch over
  // 1 thread against a step far shorter), then echo about R.
  ASSERT_GE(r.recommendations.size(), 2u);
  EXPECT_CONTAINS(r.recommendations[0], ("raise \"parallelism\" of 1:map(sleep) from 1 to "));
  EXPECT_CONTAINS(r.recommendations.back(), ("echo with a factor of"));
  EXPECT_CONTAINS(r.to_text(), ("what to change:"));
}

// The first `limit` Fashion-MNIST training images in batches of 32, no other stage.
PipelineDef fashion_batches(int64_t limit) {
  const std::string dir = dataecho::testing::kFashionDir;
  return PipelineDef::from_json({{"source",
                                  {{"kind", "idx"},
                                   {"images", dir + "/train-images-idx3-ubyte.gz"},
                                   {"labels", dir + "/train-labels-idx1-ubyte.gz"},
                                   {"limit", limit}}},
                                 {"stages", json::array({{{"op", "batch"}, {"size", 32}}})}});
}

TEST_F(TrainerTest, ProfileBoundsTheTrainStepPhaseAndSaysWhatItIsDoing) {
  ProfileOptions o;
  o.train_spec = fashion_batches(500);
  o.pipeline_seconds = 0.2;
  o.step_seconds = 0;  // spent at once: no warm-up, exactly one timed step
  o.train_steps = 50;
  std::vector<std::string> said;
  o.progress = [&](const std::string& line) { said.push_back(line); };
  ProfileReport r = run_profile(o);
  EXPECT_EQ(r.train_steps_timed, 1);
  EXPECT_GT(r.downstream_ms_per_batch, 0);
  EXPECT_CONTAINS(r.notes, ("timed over 1 of 50 steps"));
  EXPECT_EQ(r.to_json()["train_steps_timed"], 1);
  ASSERT_GE(said.size(), 3u);
  EXPECT_CONTAINS(said[0], ("running the pipeline alone"));
  EXPECT_CONTAINS(said[1], ("pipeline alone: "));
  EXPECT_CONTAINS(said[2], ("timing the train step"));
}

TEST_F(TrainerTest, ProfileRecommendsAPrefetchAndNothingElseWhenTrainingIsTheBottleneck) {
  ProfileOptions o;
  // A fast pipeline (no prefetch) and a slower step: a wide MLP on 32-image batches.
  o.train_spec = fashion_batches(2000);
  o.model.width = 1024;
  o.pipeline_seconds = 0.5;
  o.train_steps = 5;
  ProfileReport r = run_profile(o);
  ASSERT_LT(r.r, 1.1) << r.to_text();
  EXPECT_EQ(r.recommended_factor, 1);
  ASSERT_EQ(r.recommendations.size(), 2u) << r.to_text();
  EXPECT_CONTAINS(r.recommendations[0], ("training is the bottleneck, and echo would not help"));
  EXPECT_CONTAINS(r.recommendations[1], ("add {\"op\":\"prefetch\""));
  for (const auto& st : r.stages) EXPECT_FALSE(st["bottleneck"].get<bool>());
}

}  // namespace
}  // namespace dataecho::train
