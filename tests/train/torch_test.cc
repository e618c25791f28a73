// The LibTorch side: zero-copy batches, the model family, and exact resume.
#include <gtest/gtest.h>

#include "dataecho/spec/registry.h"
#include "dataecho/train/memory_pipeline.h"
#include "dataecho/train/model.h"
#include "dataecho/train/torch_batch.h"
#include "dataecho/train/trainer.h"
#include "fashion_data.h"
#include "test_util.h"

namespace dataecho::train {
namespace {

using nlohmann::json;

std::shared_ptr<const std::vector<Example>> float_images(int n) {
  auto v = std::make_shared<std::vector<Example>>();
  for (int i = 0; i < n; ++i) {
    Example e(i);
    std::vector<float> px(2 * 3 * 4);
    for (size_t k = 0; k < px.size(); ++k)
      px[k] = static_cast<float>(i * 100 + static_cast<int>(k));
    e.set("image", Tensor::from_vector(px, {2, 3, 4}));
    e.set("label", Tensor::scalar<int64_t>(i % 10));
    v->push_back(std::move(e));
  }
  return v;
}

TEST(TorchBatchTest, FloatBatchesReachTorchWithoutACopyAndKeepTheirBuffer) {
  torch::Tensor images, labels;
  const std::byte* raw = nullptr;
  {
    auto p = build_memory_pipeline(float_images(8), json::parse(R"([{"op":"batch","size":4}])"));
    Example batch = *p->next();
    InputOptions in;
    InputSignature sig = inspect_batch(batch, in, "test");
    EXPECT_EQ(sig.channels, 2);
    EXPECT_EQ(sig.height, 3);
    EXPECT_EQ(sig.width, 4);
    const Tensor& t = batch.get("image");
    raw = t.raw_data();
    long refs = t.buffer().use_count();
    TorchBatch tb = batch_to_torch(batch, in, sig);
    EXPECT_EQ(tb.images.data_ptr(), static_cast<const void*>(raw));  // the same bytes
    EXPECT_EQ(tb.labels.data_ptr(), static_cast<const void*>(batch.get("label").raw_data()));
    EXPECT_EQ(t.buffer().use_count(), refs + 1);  // the torch tensor holds the buffer
    EXPECT_EQ(tb.rows, 4);
    EXPECT_EQ(tb.fresh, 4);
    images = tb.images;
    labels = tb.labels;
  }  // pipeline and batch gone: the torch tensors still own the buffers
  ASSERT_EQ(images.sizes(), (std::vector<int64_t>{4, 2, 3, 4}));
  EXPECT_EQ(images.data_ptr(), static_cast<const void*>(raw));
  EXPECT_EQ(images[3][1][2][3].item<float>(), 300.0f + 12 + 8 + 3);
  EXPECT_EQ(labels[2].item<int64_t>(), 2);
}

TEST(TorchBatchTest, Uint8HwcBecomesFloatNchwScaledAndNormalized) {
  std::vector<Example> v;
  for (int i = 0; i < 2; ++i) {
    Example e(i);
    std::vector<uint8_t> px(2 * 2 * 3);
    for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(k * 20 + i);
    e.set("image", Tensor::from_vector(px, {2, 2, 3}));  // H=2, W=2, C=3
    e.set("label", Tensor::scalar<int64_t>(1));
    v.push_back(e);
  }
  auto p = build_memory_pipeline(std::make_shared<const std::vector<Example>>(v),
                                 json::parse(R"([{"op":"batch","size":2}])"));
  Example batch = *p->next();
  InputOptions in;
  InputSignature sig = inspect_batch(batch, in, "test");
  TorchBatch tb = batch_to_torch(batch, in, sig);
  ASSERT_EQ(tb.images.sizes(), (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_TRUE(tb.images.is_contiguous());
  // pixel (h=1, w=0, c=2) of image 1 is byte (1*2 + 0)*3 + 2 = 8: 8*20 + 1 = 161
  EXPECT_FLOAT_EQ(tb.images[1][2][1][0].item<float>(), 161.0f / 255.0f);
  in.mean = {0.5};
  in.std = {0.25};
  tb = batch_to_torch(batch, in, sig);
  EXPECT_FLOAT_EQ(tb.images[1][2][1][0].item<float>(), (161.0f / 255.0f - 0.5f) / 0.25f);
}

TEST(ModelTest, ResNetFamilyShapesAndSizes) {
  ModelConfig m;
  m.kind = "resnet";
  m.depth = 32;
  m.width = 16;
  Classifier resnet32 = make_model(m, 3, 32, 32);
  // ResNet-32 for CIFAR-10 has about 0.46M parameters (He et al. 2016, table 6).
  int64_t params = count_parameters(*resnet32);
  EXPECT_GT(params, 450000);
  EXPECT_LT(params, 500000);
  resnet32->eval();
  EXPECT_EQ(resnet32->forward(torch::zeros({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
  m.depth = 8;
  m.width = 4;
  Classifier small = make_model(m, 1, 28, 28);
  EXPECT_EQ(small->forward(torch::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_LT(count_parameters(*small), count_parameters(*resnet32));
  ModelConfig cnn;
  cnn.kind = "cnn";
  EXPECT_EQ(make_model(cnn, 1, 28, 28)->forward(torch::zeros({2, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{2, 10}));
  ModelConfig mlp;
  mlp.num_classes = 7;
  EXPECT_EQ(make_model(mlp, 1, 28, 28)->forward(torch::zeros({2, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{2, 7}));
  m.depth = 12;
  EXPECT_NE(dataecho::testing::error_of([&] { make_model(m, 1, 28, 28); }).find("6n+2"),
            std::string::npos);
}

// An uninterrupted run and a run stopped halfway then resumed end with the same weights,
// optimizer state, losses and counters (deterministic mode, 1 thread).
TEST(ResumeTest, InterruptedAndResumedEqualsUninterrupted) {
  if (!dataecho::testing::fashion_available())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto data = dataecho::testing::fashion(true, 600);
  bool echo = registry().stages.count("echo") > 0;
  json stages = json::parse(R"([{"op":"repeat","count":-1},{"op":"shuffle","buffer":200}])");
  if (echo) stages.push_back({{"op", "echo"}, {"factor", 1.5}});
  stages.push_back({{"op", "shuffle"}, {"buffer", 64}});
  stages.push_back({{"op", "batch"}, {"size", 32}});
  auto config = [&](const std::string& out, int64_t max_steps, bool resume) {
    TrainConfig c;
    c.train_pipeline = [data, stages] { return build_memory_pipeline(data, stages, 5); };
    auto eval = dataecho::testing::fashion(false, 300);
    c.eval_pipeline = [eval] {
      return build_memory_pipeline(eval, json::parse(R"([{"op":"batch","size":100}])"));
    };
    c.model.kind = "cnn";
    c.model.width = 8;
    c.optimizer.lr = 0.05;
    c.optimizer.warmup_steps = 5;
    c.optimizer.decay_steps = 40;
    c.max_steps = max_steps;
    c.eval_every = 10;
    c.seed = 11;
    c.threads = 1;
    c.progress = "off";
    c.out = out;
    c.resume = resume;
    c.eval_at_end = max_steps == 40;  // no extra evaluation at the interruption
    return c;
  };
  std::string dir = dataecho::testing::temp_dir();
  Trainer full(config(dir + "/full", 40, false));
  TrainResult a = full.run();
  Trainer first(config(dir + "/split", 23, false));
  TrainResult b1 = first.run();
  EXPECT_EQ(b1.steps, 23);
  Trainer second(config(dir + "/split", 40, true));
  TrainResult b = second.run();
  EXPECT_EQ(b.steps, 40);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.fresh, b.fresh);
  EXPECT_EQ(a.echoed, b.echoed);
  if (echo) EXPECT_GT(a.echoed, 0);
  ASSERT_EQ(a.evals.size(), b.evals.size());
  EXPECT_EQ(a.final_eval->accuracy, b.final_eval->accuracy);
  auto pa = full.model()->named_parameters();
  auto pb = second.model()->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  auto ba = full.model()->named_buffers();
  auto bb = second.model()->named_buffers();
  for (const auto& item : ba) EXPECT_TRUE(torch::equal(item.value(), bb[item.key()])) << item.key();
}

}  // namespace
}  // namespace dataecho::train
