// What slows the protocol's train step when it has a CPU of its own (the protocol's
// `--cpu-split 1` setup, docs/protocol.md): the CNN step of the protocol (depth 2, width
// 16, batch 128 of 1x28x28, SGD with Nesterov momentum, 1 LibTorch thread), pinned to the
// first CPU, timed one step at a time under two factors, crossed:
//   * the gap: the train thread sleeps GAP ms after each step, as it waits for the next
//     batch when the pipeline is the bottleneck (at R about 5 the baseline's step waits
//     about 100 ms, e = 2's about 40, e = 5's a few);
//   * the load: the second CPU idle, or running the protocol's training pipeline (local
//     shards: read, shuffle, decode, augment, batch) as fast as it goes, its threads
//     pinned there as `--cpu-split 1` pins them.
// Conditions run interleaved, round after round, so drift on a shared machine spreads
// over all of them. Per condition: the median step time over its rounds' steps, and its
// ratio to back-to-back steps on an idle machine (gap 0, no load).
//
//   step_interference_bench --spec out/protocol/config/train.json [--steps N] [--rounds R]
//                     [--gaps 0,5,40,100] [--json FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/allocator.h"
#include "dataecho/core/clock.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/spec/build.h"
#include "dataecho/train/model.h"
#include "dataecho/train/optimizer.h"

using namespace dataecho;
using namespace dataecho::train;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The protocol's training pipeline, drained on `cpus` until stopped: the load.
class PipelineLoad {
 public:
  PipelineLoad(std::string spec, std::vector<int> cpus) : spec_(std::move(spec)) {
    thread_ = std::thread([this, cpus] {
      pin_current_thread(cpus);
      set_engine_cpus(cpus);  // the pipeline's own threads start pinned there too
      auto p = build_pipeline_from_file(spec_);
      while (!stop_.load(std::memory_order_relaxed)) {
        if (!running_.load(std::memory_order_relaxed)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        if (!p->next()) p = build_pipeline_from_file(spec_);
        batches_.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  ~PipelineLoad() {
    stop_ = true;
    thread_.join();
  }
  // The pipeline holds its buffers full while paused; its threads wait on them, idle.
  void run(bool on) { running_ = on; }
  int64_t batches() const { return batches_.load(); }

 private:
  std::string spec_;
  std::atomic<bool> stop_{false}, running_{false};
  std::atomic<int64_t> batches_{0};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_pipelines();  // as the dataecho tool does
  std::string spec, json_out;
  int64_t steps = 150, rounds = 3;
  std::vector<int> gaps = {0, 5, 40, 100};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--spec") {
      spec = v;
    } else if (k == "--steps") {
      steps = std::stoll(v);
    } else if (k == "--rounds") {
      rounds = std::stoll(v);
    } else if (k == "--json") {
      json_out = v;
    } else if (k == "--gaps") {
      gaps.clear();
      std::stringstream s(v);
      for (std::string g; std::getline(s, g, ',');) gaps.push_back(std::stoi(g));
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const std::vector<int> cpus = allowed_cpus();
  if (spec.empty() || cpus.size() < 2 || steps < 1 || rounds < 1 || gaps.empty()) {
    std::fprintf(stderr,
                 "step_interference_bench --spec TRAIN_PIPELINE.json [--steps N] [--rounds R] "
                 "[--gaps 0,5,40,100] [--json FILE] (needs 2 CPUs or more)\n");
    return 2;
  }
  const auto [train_cpus, load_cpus] = split_cpus(cpus, 1);
  if (!pin_current_thread(train_cpus)) {
    std::fprintf(stderr, "sched_setaffinity refused CPU %d\n", train_cpus[0]);
    return 1;
  }
  torch::set_num_threads(1);
  torch::manual_seed(0);

  ModelConfig mc;
  mc.kind = "cnn";
  mc.depth = 2;
  mc.width = 16;
  OptimizerConfig oc;
  oc.lr = 0.05;
  Classifier model = make_model(mc, 1, 28, 28);
  auto opt = make_optimizer(model->parameters(), oc);
  model->train();
  const torch::Tensor x = torch::randn({128, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, 10, {128}, torch::kInt64);
  auto step = [&] {
    opt->zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt->step();
    (void)loss.item<float>();
  };
  for (int i = 0; i < 50; ++i) step();  // warm-up (allocator, kernels)

  PipelineLoad load(spec, load_cpus);
  struct Condition {
    int gap_ms;
    bool loaded;
    std::vector<double> ms;
    int64_t load_batches = 0;
    double load_seconds = 0;
  };
  std::vector<Condition> conds;
  for (bool loaded : {false, true})
    for (int g : gaps) conds.push_back({g, loaded, {}, 0, 0});

  std::printf("train step on CPU %d, load on CPU(s)", train_cpus[0]);
  for (int c : load_cpus) std::printf(" %d", c);
  std::printf("; %lld steps per condition per round, %lld rounds\n", static_cast<long long>(steps),
              static_cast<long long>(rounds));
  for (int64_t r = 0; r < rounds; ++r) {
    for (auto& c : conds) {
      load.run(c.loaded);
      if (c.loaded) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // at speed
      const int64_t b0 = load.batches(), t0 = now_ns();
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t a = now_ns();
        step();
        c.ms.push_back((now_ns() - a) / 1e6);
        if (c.gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(c.gap_ms));
      }
      c.load_batches += load.batches() - b0;
      c.load_seconds += (now_ns() - t0) / 1e9;
      load.run(false);
    }
    std::printf("round %lld of %lld done\n", static_cast<long long>(r + 1),
                static_cast<long long>(rounds));
    std::fflush(stdout);
  }
  const double ref = median(conds[0].ms);
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-8s %-22s %12s %10s %16s\n", "gap ms", "second CPU", "step ms", "vs idle",
              "load batches/s");
  for (const auto& c : conds) {
    const double m = median(c.ms);
    const double rate = c.load_seconds > 0 ? c.load_batches / c.load_seconds : 0;
    std::printf("%-8d %-22s %12.2f %9.3fx %16.1f\n", c.gap_ms,
                c.loaded ? "protocol pipeline" : "idle", m, m / ref, rate);
    out.push_back({{"gap_ms", c.gap_ms},
                   {"load", c.loaded ? "pipeline" : "idle"},
                   {"median_step_ms", m},
                   {"steps", c.ms.size()},
                   {"ratio_to_idle_back_to_back", m / ref},
                   {"load_batches_per_s", rate}});
  }
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(1) << "\n";
  return 0;
}
