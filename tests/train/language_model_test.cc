// The language model (model kind "transformer") end to end on text the test writes
// itself: the text source, tokenize ("bytes"), pack and padded_batch feed a tiny causal
// Transformer for a few dozen steps on one CPU thread (seconds).
#include <cmath>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "dataecho/train/model.h"
#include "dataecho/train/trainer.h"
#include "test_util.h"

namespace dataecho::train {
namespace {

using nlohmann::json;

// The unigram entropy in nats of the byte tokens of `text`: its bytes, with each line's
// newline as tokenize's end-of-sequence token.
double unigram_entropy(const std::string& text) {
  std::map<unsigned char, double> counts;
  for (unsigned char ch : text) counts[ch] += 1;
  double h = 0;
  for (const auto& [ch, n] : counts) {
    const double p = n / static_cast<double>(text.size());
    h -= p * std::log(p);
  }
  return h;
}

std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir + "/" + name) << text;
  return dir + "/" + name;
}

// text -> tokenize (bytes) -> pack (block) -> [repeat, shuffle] -> padded_batch, with an
// echo of factor 2 before or after pack when `echo` says ("before_pack", "after_pack").
// `reads`: pack writes its sequences' epochs and echo indices (the trainer then counts
// fresh sequences; without them a block is one example).
PipelineDef text_spec(const std::string& path, int64_t block, bool training,
                      const std::string& echo = "", bool reads = true) {
  json stages = json::array();
  if (training) stages.push_back({{"op", "repeat"}, {"count", -1}});
  stages.push_back({{"op", "map"}, {"fn", "tokenize"}, {"args", {{"tokenizer", "bytes"}}}});
  if (echo == "before_pack") stages.push_back({{"op", "echo"}, {"factor", 2}});
  json pack = {{"op", "pack"}, {"length", block}};
  if (reads) pack.update({{"epochs_field", "epochs"}, {"echoes_field", "echoes"}});
  stages.push_back(pack);
  if (echo == "after_pack") stages.push_back({{"op", "echo"}, {"factor", 2}});
  if (training) stages.push_back({{"op", "shuffle"}, {"buffer", 32}});
  // pack's `ids` (the block's sequences) differ in length: padded_batch pads them.
  stages.push_back({{"op", "padded_batch"}, {"size", 16}, {"lengths", false}});
  return PipelineDef::from_json(
      {{"seed", 3}, {"source", {{"kind", "text"}, {"uri", path}}}, {"stages", stages}});
}

TrainConfig lm_config(const std::string& train, const std::string& valid, int64_t max_steps) {
  TrainConfig c;
  c.train_spec = text_spec(train, 33, true);
  c.eval_spec = text_spec(valid, 33, false);
  c.model.kind = "transformer";
  c.model.depth = 2;
  c.model.width = 32;
  c.model.heads = 4;
  c.model.context = 32;
  c.optimizer.kind = "adamw";
  c.optimizer.lr = 1e-2;
  c.optimizer.weight_decay = 0;
  c.optimizer.warmup_steps = 5;
  c.optimizer.clip_norm = 1.0;
  c.max_steps = max_steps;
  c.eval_every = 10;
  c.seed = 7;
  c.threads = 1;
  c.progress = "off";
  return c;
}

class LanguageModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = dataecho::testing::temp_dir();
    train_text_ = dataecho::testing::word_lines(400, 1);
    train_ = write(dir_, "train.txt", train_text_);
    valid_ = write(dir_, "valid.txt", dataecho::testing::word_lines(40, 2));
  }
  std::string dir_, train_text_, train_, valid_;
};

TEST_F(LanguageModelTest, LossFallsBelowTheUnigramEntropyOfItsText) {
  const double unigram = unigram_entropy(train_text_);
  TrainConfig c = lm_config(train_, valid_, 60);
  c.target_loss = 0.9 * unigram;  // nats per token; stops at the first evaluation below it
  TrainResult r = Trainer(c).run();
  ASSERT_TRUE(r.final_eval);
  EXPECT_GT(r.final_eval->tokens, 0);
  EXPECT_NEAR(r.final_eval->bits_per_byte(), r.final_eval->loss / std::log(2.0), 1e-12);
  EXPECT_LT(r.final_eval->loss, unigram) << "unigram entropy " << unigram << " nats";
  EXPECT_TRUE(r.reached_target) << "loss " << r.final_eval->loss << ", target " << *c.target_loss;
  EXPECT_LT(r.losses.back(), r.losses.front());
  EXPECT_EQ(r.input, "int32 [33] token blocks with documents");
  const json s = r.to_json();
  EXPECT_TRUE(s.contains("final_bits_per_byte")) << s.dump();
}

TEST_F(LanguageModelTest, ResumedRunIsBitIdenticalToTheUninterruptedOne) {
  auto config = [&](const std::string& out, int64_t steps, bool resume) {
    TrainConfig c = lm_config(train_, valid_, 20);
    c.max_steps = steps;
    c.eval_every = 5;
    c.optimizer.decay_steps = 20;
    c.out = out;
    c.resume = resume;
    c.eval_at_end = steps == 20;
    return c;
  };
  Trainer full(config(dir_ + "/full", 20, false));
  const TrainResult a = full.run();
  EXPECT_EQ(Trainer(config(dir_ + "/split", 9, false)).run().steps, 9);
  Trainer resumed(config(dir_ + "/split", 20, true));
  const TrainResult b = resumed.run();
  EXPECT_EQ(b.steps, 20);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.fresh, b.fresh);
  ASSERT_EQ(a.evals.size(), b.evals.size());
  EXPECT_EQ(a.final_eval->loss, b.final_eval->loss);
  auto pa = full.model()->named_parameters();
  auto pb = resumed.model()->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
}

TEST_F(LanguageModelTest, FreshCountsTheSourcesSequencesWhereverTheEchoIs) {
  // Fresh = the lines (sequences) a step trained on a piece of, not the blocks: about
  // the tokens consumed over a line's mean tokens. Echoing before pack (lines repeated)
  // and after it (blocks repeated) both halve it, and both count their copies as echoed.
  const double tokens_per_line = static_cast<double>(train_text_.size()) / 400;  // with EOS
  auto run = [&](const std::string& echo, const std::string& out = "", int64_t steps = 20,
                 bool resume = false, bool reads = true) {
    TrainConfig c = lm_config(train_, valid_, 20);
    c.train_spec = text_spec(train_, 33, true, echo, reads);
    c.max_steps = steps;
    c.optimizer.decay_steps = 20;
    c.eval_every = 0;
    c.eval_at_end = false;
    c.out = out;
    c.resume = resume;
    return Trainer(c).run();
  };
  const TrainResult base = run("");
  const double consumed_lines = 20.0 * 16 * 33 / tokens_per_line;
  EXPECT_EQ(base.echoed, 0) << "a line's pieces in several blocks are one read";
  EXPECT_NEAR(static_cast<double>(base.fresh), consumed_lines, 0.1 * consumed_lines);
  EXPECT_GT(base.fresh, 20 * 16) << "more lines than blocks: a block holds pieces of 2 or 3";
  for (const std::string echo : {"before_pack", "after_pack"}) {
    const TrainResult r = run(echo);
    EXPECT_NEAR(r.achieved_echo, 2.0, 0.15) << echo;
    EXPECT_NEAR(static_cast<double>(r.fresh), base.fresh / 2.0, 0.15 * base.fresh) << echo;
  }
  // Without pack's epochs and echo indices a block is one example.
  EXPECT_EQ(run("", "", 20, false, /*reads=*/false).fresh, 20 * 16);
  // The copies consumed survive a resume: the counts equal the uninterrupted run's.
  const TrainResult full = run("before_pack", dir_ + "/full");
  EXPECT_EQ(run("before_pack", dir_ + "/split", 9).steps, 9);
  const TrainResult resumed = run("before_pack", dir_ + "/split", 20, true);
  EXPECT_EQ(resumed.fresh, full.fresh);
  EXPECT_EQ(resumed.echoed, full.echoed);
}

TEST_F(LanguageModelTest, BadInputsFailBeforeTrainingWithAClearMessage) {
  const std::string empty = write(dir_, "empty.txt", "");
  std::string e = dataecho::testing::error_of([&] { Trainer(lm_config(empty, valid_, 5)).run(); });
  EXPECT_CONTAINS(e, "training pipeline: yielded no batch");
  EXPECT_CONTAINS(e, "empty.txt");

  TrainConfig wide = lm_config(train_, valid_, 5);
  wide.model.context = 64;  // the blocks hold 33 tokens
  e = dataecho::testing::error_of([&] { Trainer(wide).run(); });
  EXPECT_CONTAINS(e, "blocks hold 33 tokens");
  EXPECT_CONTAINS(e, "context + 1 = 65");

  TrainConfig small_vocab = lm_config(train_, valid_, 5);
  small_vocab.model.vocab_size = 100;  // lower-case letters are above 100
  e = dataecho::testing::error_of([&] { Trainer(small_vocab).run(); });
  EXPECT_CONTAINS(e, "is outside [0, 100)");

  TrainConfig other = lm_config(train_, valid_, 5);
  other.eval_spec = text_spec(valid_, 17, false);
  e = dataecho::testing::error_of([&] { Trainer(other).run(); });
  EXPECT_CONTAINS(e, "evaluation pipeline: its batches are int32 [17] token blocks");

  TrainConfig heads = lm_config(train_, valid_, 5);
  heads.model.heads = 5;
  e = dataecho::testing::error_of([&] { Trainer(heads).run(); });
  EXPECT_CONTAINS(e, "not a multiple of heads 5");
}

}  // namespace
}  // namespace dataecho::train
