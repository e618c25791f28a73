// Elastic sharding in the trainer (docs/distributed.md, "Changing the number of ranks"):
// every rank reads its lanes of one global order, so N ranks train the steps one rank
// trains, and a checkpoint of N ranks resumes on M. Real ranks as processes of
// `dataecho-train train --nproc N --sharding elastic`.
#include <string>
#include <vector>

#include "distributed/train_runs.h"

namespace {
using namespace distributed_testing;

// Echo before the shuffle and the augmentation, as the protocol's pipelines: each
// echoed copy has an augmentation of its own, which every world size must draw alike.
// A global batch of 25 splits unevenly over 2 and 3 ranks (13 + 12, 9 + 8 + 8 rows), so
// the ranks' gradients must be weighted by their rows.
json elastic_stages() {
  return json::array(
      {{{"op", "echo"}, {"factor", 2}},
       {{"op", "shuffle"}, {"buffer", 200}},
       {{"op", "map"}, {"fn", "augment"}, {"args", {{"pad_crop", 2}, {"flip", true}}}},
       batch(25, /*drop_remainder=*/false)});
}

// The flags of every elastic run here: 6 lanes (1, 2 and 3 ranks divide them), an MLP,
// a learning rate schedule that does not depend on --max-steps.
std::string elastic_args(const std::string& spec) {
  return "--train-spec " + spec +
         " --sharding elastic --lanes 6 --model mlp --lr 0.05 --seed 7 --decay-steps 100";
}

void expect_same_losses(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << "step " << i;
}

TEST_F(DistributedTest, ElasticRanksTrainTheSameStepsAsOneRank) {
  // 610 images, echoed twice: 1,220 rows, 48 global batches of 25 and 20 rows over. The
  // lanes end at different lengths, so the 49th global batch is short: the job ends
  // before it for any world size, although the batch keeps its remainder.
  const std::string s = spec("tail.json", 610, elastic_stages());
  Ran two = sh(train(elastic_args(s) + " --nproc 2 --out " + out("two")));
  ASSERT_EQ(two.status, 0) << two.output;
  Ran one = sh(train(elastic_args(s) + " --out " + out("one")));
  ASSERT_EQ(one.status, 0) << one.output;
  expect_same_losses(losses(out("one")), losses(out("two")));
  const json a = summary(out("one")), b = summary(out("two"));
  EXPECT_EQ(a["steps"], 48);
  for (const char* k : {"steps", "fresh", "echoed", "stop_reason"}) EXPECT_EQ(a[k], b[k]) << k;
  EXPECT_EQ(b["stop_reason"], "end_of_data");
  EXPECT_EQ(b["world_size"], 2);
  EXPECT_EQ(b["ranks_identical"], true);
}

TEST_F(DistributedTest, ElasticResumeOnAnotherWorldSize) {
  // 600 images, echoed twice: 1,200 rows, 48 global batches. 20 steps on N ranks, then
  // --resume on M ranks to the end of the data, against the uninterrupted run on one.
  const std::string s = spec("resume.json", 600, elastic_stages());
  const std::string whole = out("whole");
  Ran w = sh(train(elastic_args(s) + " --out " + whole));
  ASSERT_EQ(w.status, 0) << w.output;
  const json expected = summary(whole);
  ASSERT_EQ(expected["steps"], 48);
  for (int n : {1, 2, 3}) {
    Ran part = sh(train(elastic_args(s) + " --max-steps 20 --nproc " + std::to_string(n) +
                        " --out " + out("part-" + std::to_string(n))));
    ASSERT_EQ(part.status, 0) << part.output;
  }
  for (const auto& [n, m] : std::vector<std::pair<int, int>>{{2, 1}, {1, 2}, {2, 3}, {3, 2}}) {
    const std::string name = std::to_string(n) + "to" + std::to_string(m);
    SCOPED_TRACE(name);
    fs::copy(out("part-" + std::to_string(n)), out(name), fs::copy_options::recursive);
    Ran rest = sh(
        train(elastic_args(s) + " --resume --nproc " + std::to_string(m) + " --out " + out(name)));
    ASSERT_EQ(rest.status, 0) << rest.output;
    expect_same_losses(losses(whole), losses(out(name)));
    const json got = summary(out(name));
    for (const char* k : {"steps", "fresh", "echoed", "stop_reason"})
      EXPECT_EQ(got[k], expected[k]) << k;
    // The ranks' read sets, united in one file: every image once (one epoch).
    const auto keys = read_set(fs::path(out(name)) / "checkpoint" / "fresh_keys.bin");
    EXPECT_EQ(keys.size(), 600u);
    EXPECT_EQ(keys.begin()->first, 0);
    EXPECT_EQ(keys.rbegin()->first, 599);
  }
  // A checkpoint at the end of the data holds no pipeline state, and says so on --resume.
  const fs::path ended = fs::path(out("2to1")) / "checkpoint";
  EXPECT_EQ(json::parse(read_bytes(ended / "state.json"))["pipeline_ended"], true);
  EXPECT_FALSE(fs::exists(ended / "pipeline.state"));
  Ran again = sh(train(elastic_args(s) + " --resume --out " + out("2to1")));
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.output.find("nothing left after the checkpoint"), std::string::npos)
      << again.output;
}

TEST_F(DistributedTest, ElasticAndFileCheckpointsRefuseEachOther) {
  const std::string s = spec("refuse.json", 600, elastic_stages());
  const std::string files = out("files"), elastic = out("elastic");
  const std::string common = " --model mlp --lr 0.05 --seed 7 --max-steps 3";
  ASSERT_EQ(sh(train("--train-spec " + s + common + " --out " + files)).status, 0);
  Ran e =
      sh(train("--train-spec " + s + common + " --sharding elastic --lanes 4 --out " + elastic));
  ASSERT_EQ(e.status, 0) << e.output;
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"--sharding elastic --lanes 4 --resume --out " + files,
            "written with sharding \"files\" and this job has sharding \"elastic\""},
           {"--resume --out " + elastic,
            "written with sharding \"elastic\" and this job has sharding \"files\""},
           {"--sharding elastic --lanes 6 --resume --out " + elastic,
            "the checkpoint has 4 lanes and this job 6: resume with --lanes 4"},
           {"--sharding elastic --lanes 4 --nproc 3 --resume --out " + elastic,
            "4 lanes do not split over 3 ranks: use 1, 2 or 4"},
       }) {
    Ran r = sh(train("--train-spec " + s + common + " " + c.args));
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
  }
  // A spec without a seed (and a run seed of 0), and one with a shard stage.
  const std::string unseeded = spec("unseeded.json", 600, elastic_stages(), /*seeded=*/false);
  Ran no_seed = sh(
      train("--train-spec " + unseeded + " --sharding elastic --model mlp --seed 0 --max-steps 1"));
  EXPECT_NE(no_seed.status, 0);
  EXPECT_NE(no_seed.output.find("elastic sharding needs a pipeline seed"), std::string::npos)
      << no_seed.output;
  json sharded = elastic_stages();
  const json shard_stage = {{"op", "shard"}, {"num_shards", 2}, {"index", 0}};
  sharded.insert(sharded.begin(), shard_stage);
  Ran shard = sh(train("--train-spec " + spec("shard.json", 600, sharded) +
                       " --sharding elastic --model mlp --max-steps 1"));
  EXPECT_NE(shard.status, 0);
  EXPECT_NE(shard.output.find("has a \"shard\" stage"), std::string::npos) << shard.output;
}

}  // namespace
