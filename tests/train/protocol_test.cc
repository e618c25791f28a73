// The experiment protocol's premise (docs/protocol.md): with a fixed echo factor the data
// order does not depend on timing, so an unthrottled local run counts the same fresh
// examples at every evaluation as a run over a slow network. The tuning sweep and the
// fresh-example counts then run compute-bound on local shards, and only the chosen
// configurations run over the throttled network for wall-clock. Real shards, a real
// nginx with limit_rate on loopback, real LibTorch training.
#include <filesystem>

#include <gtest/gtest.h>

#include "dataecho/formats/convert.h"
#include "dataecho/spec/registry.h"
#include "dataecho/train/memory_pipeline.h"
#include "dataecho/train/trainer.h"
#include "fashion_data.h"
#include "io/nginx_server.h"
#include "test_util.h"

namespace dataecho::train {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json train_spec(const std::string& uri_prefix) {
  return {{"seed", 5},
          {"source",
           {{"kind", "tfrecord"},
            {"uri", uri_prefix + "train-{00000..00003}-of-00004.tfrecord"},
            {"features", {{"image", {{"key", "image/encoded"}}}, {"label", "image/class/label"}}}}},
          {"stages", json::parse(R"([
             {"op": "interleave", "cycle": 4, "parallelism": 4},
             {"op": "repeat", "count": -1},
             {"op": "shuffle", "buffer": 256},
             {"op": "map", "fn": "decode_image", "parallelism": 2},
             {"op": "echo", "factor": 2},
             {"op": "shuffle", "buffer": 500},
             {"op": "map", "fn": "augment", "args": {"pad_crop": 2, "flip": true, "normalize": true}},
             {"op": "batch", "size": 50, "drop_remainder": true},
             {"op": "prefetch", "buffer": 4}])")}};
}

TEST(ProtocolTest, ThrottledHttpAndLocalRunsCountTheSameFreshExamplesAtEveryEvaluation) {
  if (!dataecho::testing::fashion_available())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!registry().sources.count("tfrecord") || !registry().stages.count("echo"))
    GTEST_SKIP() << "tfrecord source or echo op not built in";
  const std::string dir = dataecho::testing::temp_dir() + "/shards";
  ConvertOptions co;
  co.idx_images = std::string(dataecho::testing::kFashionDir) + "/train-images-idx3-ubyte.gz";
  co.idx_labels = std::string(dataecho::testing::kFashionDir) + "/train-labels-idx1-ubyte.gz";
  co.limit = 1000;
  co.out_dir = dir;
  co.name = "train";
  co.shards = 4;
  co.encode = "png";
  ConvertSummary cs = convert_dataset(co);
  ASSERT_EQ(cs.records, 1000);

  dataecho::testing::NginxServer server;
  dataecho::testing::NginxServerOptions so;
  so.limit_rate = "64k";  // about 120 KiB per shard: 2 s an epoch, slower than training
  server.start(dir, so);

  auto run = [&](const std::string& prefix) {
    TrainConfig c;
    c.train_spec = PipelineDef::from_json(train_spec(prefix));
    auto eval = dataecho::testing::fashion(false, 300);
    c.eval_pipeline = [eval] {
      return build_memory_pipeline(
          eval, json::parse(R"([{"op":"map","fn":"normalize"},{"op":"batch","size":300}])"));
    };
    c.model.kind = "mlp";
    c.model.width = 64;
    c.optimizer.lr = 0.05;
    c.seed = 3;
    c.threads = 1;
    c.progress = "off";
    c.eval_every = 0;
    c.eval_every_fresh = 250;
    c.max_fresh = 1500;  // one and a half epochs: the second epoch's re-reads count
    return Trainer(c).run();
  };
  TrainResult local = run(dir + "/");
  TrainResult http = run(server.url(""));

  EXPECT_EQ(local.stop_reason, "max_fresh");
  EXPECT_EQ(http.stop_reason, "max_fresh");
  EXPECT_EQ(http.steps, local.steps);
  EXPECT_EQ(http.fresh, local.fresh);
  EXPECT_EQ(http.echoed, local.echoed);
  ASSERT_EQ(http.evals.size(), local.evals.size());
  ASSERT_GE(local.evals.size(), 6u);
  for (size_t i = 0; i < local.evals.size(); ++i) {
    EXPECT_EQ(http.evals[i].step, local.evals[i].step) << "evaluation " << i;
    EXPECT_EQ(http.evals[i].fresh, local.evals[i].fresh) << "evaluation " << i;
    EXPECT_EQ(http.evals[i].echoed, local.evals[i].echoed) << "evaluation " << i;
  }
  // The throttled run really was slower and waited on its input.
  EXPECT_GT(http.wait_seconds, local.wait_seconds);
  EXPECT_GT(http.fresh, 1000);  // into the second epoch
}

}  // namespace
}  // namespace dataecho::train
