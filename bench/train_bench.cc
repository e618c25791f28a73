// Trainer overhead: steps/s of the Trainer fed from an in-memory pipeline, next to a
// bare LibTorch loop over the same batches (already torch tensors: the same uint8 ->
// float conversion, forward, backward, SGD step), in the same process, alternating.
// Target: the trainer reaches >= 95% of the bare loop's steps/s.
//
//   train_bench [--model mlp|cnn] [--steps N] [--batch B] [--threads T] [--rounds R]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataecho/core/allocator.h"
#include "dataecho/core/clock.h"
#include "dataecho/core/rng.h"
#include "dataecho/train/memory_pipeline.h"
#include "dataecho/train/model.h"
#include "dataecho/train/optimizer.h"
#include "dataecho/train/torch_batch.h"
#include "dataecho/train/trainer.h"

using namespace dataecho;
using namespace dataecho::train;

int main(int argc, char** argv) {
  tune_allocator_for_pipelines();  // as the dataecho tool does
  std::string model = "mlp";
  int64_t steps = 300, batch = 128, rounds = 3, examples = 4096;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      model = v;
    else if (k == "--steps")
      steps = std::stoll(v);
    else if (k == "--batch")
      batch = std::stoll(v);
    else if (k == "--threads")
      threads = std::stoi(v);
    else if (k == "--rounds")
      rounds = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  // Fashion-MNIST-shaped data: uint8 [28,28,1] images, int64 labels.
  auto data = std::make_shared<std::vector<Example>>();
  Rng rng(1);
  for (int64_t i = 0; i < examples; ++i) {
    Example e(i);
    e.set("image", Tensor::make(DType::kUInt8, {28, 28, 1}, [&](std::byte* p) {
            for (int k = 0; k < 784; ++k) p[k] = static_cast<std::byte>(rng.next_u64() & 0xff);
          }));
    e.set("label", Tensor::scalar<int64_t>(static_cast<int64_t>(rng.uniform(10))));
    data->push_back(std::move(e));
  }
  nlohmann::json stages = nlohmann::json::array(
      {{{"op", "repeat"}, {"count", -1}}, {{"op", "batch"}, {"size", batch}}});

  // The bare loop's batches: the same examples, collated by the same pipeline once.
  InputOptions input;
  std::vector<torch::Tensor> xs, ys;
  {
    auto p =
        build_memory_pipeline(data, nlohmann::json::array({{{"op", "batch"}, {"size", batch}}}));
    while (auto b = p->next()) {
      if (static_cast<int64_t>(b->num_rows()) != batch) break;
      xs.push_back(to_torch(b->get("image")));
      ys.push_back(to_torch(b->get("label")));
    }
  }
  ModelConfig mc;
  mc.kind = model;
  OptimizerConfig oc;
  oc.lr = 0.01;
  torch::set_num_threads(threads);

  auto bare = [&] {
    torch::manual_seed(0);
    Classifier m = make_model(mc, 1, 28, 28);
    auto opt = make_optimizer(m->parameters(), oc);
    m->train();
    int64_t t0 = now_ns();
    for (int64_t s = 0; s < steps; ++s) {
      size_t i = static_cast<size_t>(s) % xs.size();
      torch::Tensor x =
          xs[i].to(torch::kFloat32).permute({0, 3, 1, 2}).contiguous().mul_(1.0 / 255.0);
      set_learning_rate(*opt, oc.lr);
      opt->zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(m->forward(x), ys[i]);
      loss.backward();
      opt->step();
      (void)loss.item<float>();
    }
    return steps / ((now_ns() - t0) / 1e9);
  };
  struct TrainerRate {
    double loop, whole;
  };
  auto trainer = [&] {
    TrainConfig c;
    c.train_pipeline = [&] { return build_memory_pipeline(data, stages); };
    c.model = mc;
    c.optimizer = oc;
    c.max_steps = steps;
    c.eval_every = 0;
    c.threads = threads;
    c.progress = "off";
    int64_t t0 = now_ns();
    TrainResult r = Trainer(c).run();
    double whole = steps / ((now_ns() - t0) / 1e9);
    return TrainerRate{r.steps / r.train_seconds, whole};
  };

  std::printf("model %s, batch %lld, %lld steps per run, %d thread(s), %lld rounds\n",
              model.c_str(), static_cast<long long>(batch), static_cast<long long>(steps), threads,
              static_cast<long long>(rounds));
  bare();  // warm-up (allocator, oneDNN kernels)
  std::vector<double> b, t, w;
  for (int64_t r = 0; r < rounds; ++r) {
    b.push_back(bare());
    TrainerRate tr = trainer();
    t.push_back(tr.loop);
    w.push_back(tr.whole);
    std::printf(
        "round %lld: bare %.1f steps/s | trainer %.1f steps/s (%.1f%%) | trainer incl. setup %.1f "
        "steps/s\n",
        static_cast<long long>(r + 1), b.back(), t.back(), 100 * t.back() / b.back(), w.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double mb = median(b), mt = median(t), mw = median(w);
  std::printf(
      "median: bare %.1f steps/s | trainer %.1f steps/s = %.1f%% of bare (target >= 95%%) | incl. "
      "setup %.1f%%\n",
      mb, mt, 100 * mt / mb, 100 * mw / mb);
  return 0;
}
