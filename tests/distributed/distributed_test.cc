// Data-parallel training (docs/distributed.md), end to end: real ranks as processes of
// `dataecho-train train`, on c10d's Gloo over loopback, launched by --nproc or by hand
// with torchrun's environment (file sharding; elastic sharding: elastic_train_test.cc).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distributed/train_runs.h"

namespace {
using namespace distributed_testing;

TEST_F(DistributedTest, TwoRanksOfBatch32EqualOneRankOfBatch64) {
  // One file: the shard op gives rank r every other element from r, so the ranks' first
  // batches of 32 are together the one-rank run's first batch of 64 (no shuffle).
  const std::string s32 = spec("b32.json", 4096, json::array({batch(32)}));
  const std::string s64 = spec("b64.json", 4096, json::array({batch(64)}));
  const std::string common = " --model mlp --max-steps 50 --lr 0.05 --seed 7";
  Ran two = sh(train("--train-spec " + s32 + common + " --nproc 2 --out " + out("two")));
  ASSERT_EQ(two.status, 0) << two.output;
  Ran one = sh(train("--train-spec " + s64 + common + " --out " + out("one")));
  ASSERT_EQ(one.status, 0) << one.output;
  const std::vector<float> a = losses(out("one")), b = losses(out("two"));
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), 50u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << "step " << i;
  const json s = summary(out("two"));
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["fresh"], 3200);  // global: 50 steps x 2 ranks x 32
  EXPECT_EQ(s["ranks_identical"], true);
  EXPECT_GT(s["communication_seconds"].get<double>(), 0);
}

TEST_F(DistributedTest, EveryExampleOfAnEpochIsReadByExactlyOneRank) {
  for (int factor : {1, 3}) {
    SCOPED_TRACE("echo factor " + std::to_string(factor));
    json stages = json::array();
    if (factor > 1) stages.push_back({{"op", "echo"}, {"factor", factor}});
    stages.push_back({{"op", "shuffle"}, {"buffer", 300}});
    stages.push_back(batch(25));
    const std::string s = spec("epoch.json", 2000, stages);
    const std::string o = out("epoch-e" + std::to_string(factor));
    Ran r = sh(train("--train-spec " + s + " --model mlp --lr 0.05 --nproc 2 --out " + o));
    ASSERT_EQ(r.status, 0) << r.output;
    const json sum = summary(o);
    EXPECT_EQ(sum["stop_reason"], "end_of_data");
    EXPECT_EQ(sum["fresh"], 2000);
    EXPECT_EQ(sum["echoed"], 2000 * (factor - 1));
    const auto r0 = read_set(fs::path(o) / "checkpoint" / "fresh_keys-rank-0.bin");
    const auto r1 = read_set(fs::path(o) / "checkpoint" / "fresh_keys-rank-1.bin");
    EXPECT_EQ(r0.size(), 1000u);
    EXPECT_EQ(r1.size(), 1000u);
    std::set<std::pair<int64_t, int32_t>> all = r0;
    all.insert(r1.begin(), r1.end());
    EXPECT_EQ(all.size(), 2000u) << "a rank read an example that the other read too";
    EXPECT_EQ(all.begin()->first, 0);
    EXPECT_EQ(all.rbegin()->first, 1999);
  }
}

TEST_F(DistributedTest, ThreeRanksOverUnevenFilesFinishTogether) {
  // 8 files over 3 ranks: 3, 3 and 2 files (375, 375 and 250 examples): the third runs
  // out first, and the job ends there, on every rank, without a hang.
  const std::string shards = out("shards");
  Ran conv = sh(
      kBin + " convert --images " + kFashion + "/train-images-idx3-ubyte.gz --labels " + kFashion +
      "/train-labels-idx1-ubyte.gz --to tfrecord --shards 8 --limit 1000 --out " + shards);
  ASSERT_EQ(conv.status, 0) << conv.output;
  json j = {
      {"source",
       {{"kind", "tfrecord"},
        {"uri", shards + "/*.tfrecord"},
        {"features", {{"image", {{"key", "image/encoded"}}}, {"label", "image/class/label"}}}}},
      {"stages", json::array({{{"op", "interleave"}, {"cycle", 2}},
                              {{"op", "map"}, {"fn", "decode_image"}},
                              batch(25)})}};
  std::ofstream(fs::path(dir_) / "files.json") << j.dump();
  Ran r = sh("timeout 300 " + train("--train-spec " + dir_ + "/files.json --model mlp --lr 0.05 " +
                                    "--nproc 3 --dist-timeout 30 --out " + out("uneven")));
  ASSERT_EQ(r.status, 0) << r.output;
  const json s = summary(out("uneven"));
  EXPECT_EQ(s["stop_reason"], "end_of_data");
  EXPECT_EQ(s["steps"], 10);  // 250 / 25
  EXPECT_EQ(s["fresh"], 750);
  EXPECT_EQ(s["ranks_identical"], true);
}

TEST_F(DistributedTest, ResumeEqualsAnUninterruptedRunAndRanksStayIdentical) {
  // BatchNorm (cnn), echo and two shuffles: the model, the optimizer and each rank's
  // pipeline state must all come back.
  const std::string s = spec("resume.json", 2000,
                             json::array({{{"op", "repeat"}, {"count", -1}},
                                          {{"op", "shuffle"}, {"buffer", 500}},
                                          {{"op", "echo"}, {"factor", 2}},
                                          {{"op", "shuffle"}, {"buffer", 100}},
                                          batch(32),
                                          {{"op", "prefetch"}, {"buffer", 2}}}));
  const std::string common =
      " --train-spec " + s + " --model cnn --lr 0.05 --seed 5 --decay-steps 40 --nproc 2";
  ASSERT_EQ(sh(train(common + " --max-steps 40 --out " + out("whole"))).status, 0);
  Ran part = sh(train(common + " --max-steps 20 --out " + out("parts")));
  ASSERT_EQ(part.status, 0) << part.output;
  Ran rest = sh(train(common + " --max-steps 40 --resume --out " + out("parts")));
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_EQ(losses(out("whole")), losses(out("parts")));
  EXPECT_EQ(summary(out("whole"))["fresh"], summary(out("parts"))["fresh"]);
  EXPECT_EQ(summary(out("parts"))["ranks_identical"], true);
  EXPECT_EQ(read_bytes(fs::path(out("whole")) / "checkpoint" / "model.pt").size(),
            read_bytes(fs::path(out("parts")) / "checkpoint" / "model.pt").size());

  // Another world size is refused, naming both.
  Ran three = sh(train(" --train-spec " + s +
                       " --model cnn --nproc 3 --max-steps 60 --resume --out " + out("parts")));
  EXPECT_NE(three.status, 0);
  EXPECT_NE(three.output.find("written by 2 ranks and this job has 3"), std::string::npos)
      << three.output;
}

TEST(DistributedLanguageModelTest, TwoRanksCountEachLineOnceAndResumeExactly) {
  // The language model on 2 ranks: each rank takes every other line of the text (the
  // shard stage goes before tokenize and pack), echoes it twice before pack, and the
  // copies each rank consumed come back with its checkpoint.
  const fs::path dir = dataecho::testing::temp_dir();
  const std::string text = dataecho::testing::word_lines(400, 1);
  std::ofstream(dir / "train.txt") << text;
  const json stages = json::array(
      {{{"op", "repeat"}, {"count", -1}},
       {{"op", "map"}, {"fn", "tokenize"}, {"args", {{"tokenizer", "bytes"}}}},
       {{"op", "echo"}, {"factor", 2}},
       {{"op", "pack"}, {"length", 33}, {"epochs_field", "epochs"}, {"echoes_field", "echoes"}},
       {{"op", "padded_batch"}, {"size", 8}, {"lengths", false}}});
  std::ofstream(dir / "train.json") << json{
      {"seed", 3},
      {"source", {{"kind", "text"}, {"uri", (dir / "train.txt").string()}}},
      {"stages", stages}}.dump(1);
  const std::string common = kBin + " train --progress off --eval-every 0 --train-spec " +
                             (dir / "train.json").string() +
                             " --model transformer --depth 2 --width 32 --heads 4 --context 32"
                             " --optimizer adamw --lr 0.01 --seed 7 --threads 1"
                             " --decay-steps 20 --nproc 2 --out ";
  Ran whole = sh(common + (dir / "whole").string() + " --max-steps 20");
  ASSERT_EQ(whole.status, 0) << whole.output;
  ASSERT_EQ(sh(common + (dir / "parts").string() + " --max-steps 9").status, 0);
  Ran rest = sh(common + (dir / "parts").string() + " --max-steps 20 --resume");
  ASSERT_EQ(rest.status, 0) << rest.output;

  const json s = summary(dir / "whole");
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["ranks_identical"], true);
  // 20 steps x 2 ranks x 8 blocks of 33 tokens: the lines they hold pieces of, about
  // half of them fresh (a line's tokens with its end-of-sequence token: its bytes).
  const double lines = 20.0 * 2 * 8 * 33 / (static_cast<double>(text.size()) / 400);
  EXPECT_NEAR(s["achieved_echo"].get<double>(), 2.0, 0.1);
  EXPECT_NEAR(s["fresh"].get<double>(), lines / 2, 0.15 * lines / 2);
  EXPECT_EQ(losses(dir / "whole"), losses(dir / "parts"));
  EXPECT_EQ(summary(dir / "parts")["fresh"], s["fresh"]);
  EXPECT_EQ(summary(dir / "parts")["echoed"], s["echoed"]);
}

// The launcher's children: pids of the processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::ifstream f("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) +
                  "/children");
  pid_t p;
  while (f >> p) out.push_back(p);
  return out;
}
// Whether `pid` ignores SIGPIPE (its SigIgn mask in /proc/PID/status).
bool ignores_sigpipe(pid_t pid) {
  const std::string status = read_bytes("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("SigIgn:");
  if (at == std::string::npos) return false;
  const uint64_t mask = std::stoull(status.substr(at + 7, 24), nullptr, 16);
  return (mask >> (SIGPIPE - 1)) & 1;
}

std::string rank_of(pid_t pid) {
  const std::string env = read_bytes("/proc/" + std::to_string(pid) + "/environ");
  const size_t at = env.find(std::string("\0RANK=", 6));
  return at == std::string::npos ? "" : env.substr(at + 6, env.find('\0', at + 6) - at - 6);
}

using process_testing::start_job;

// Waits up to 120 s for `path` to appear (a job's first checkpoint: its ranks train).
bool wait_for_file(const fs::path& path) {
  for (int i = 0; i < 1200 && !fs::exists(path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return fs::exists(path);
}

TEST_F(DistributedTest, KillingOneRankEndsTheOthersWithAnErrorNamingIt) {
  const std::string s =
      spec("long.json", 20000, json::array({{{"op", "repeat"}, {"count", -1}}, batch(32)}));
  const std::string log = out("kill.log");
  const std::string cmd =
      train("--train-spec " + s + " --model mlp --max-steps 1000000 --nproc 3 " +
            "--dist-timeout 10 --checkpoint-every 20 --out " + out("killed"));
  const pid_t launcher = start_job(cmd, log);
  ASSERT_GT(launcher, 0);
  const fs::path state = fs::path(out("killed")) / "checkpoint" / "state.json";
  ASSERT_TRUE(wait_for_file(state)) << read_bytes(log);
  pid_t victim = 0;
  for (pid_t c : children_of(launcher)) {
    if (rank_of(c) == "2") victim = c;
    // A survivor writing to the dead rank gets an error, not a silent SIGPIPE death.
    EXPECT_TRUE(ignores_sigpipe(c)) << "rank " << rank_of(c);
  }
  ASSERT_NE(victim, 0);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(launcher, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    ::kill(launcher, SIGKILL);
    for (pid_t c : children_of(launcher)) ::kill(c, SIGKILL);
    ::waitpid(launcher, &status, 0);
    FAIL() << "the job did not end within 60 s of a rank's death:\n" << read_bytes(log);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The survivors' collective fails at once (the connections reset); a rank is lost once
  // its check-in (every second) has been silent for 3 s: well within the 10 s timeout.
  EXPECT_LT(took, 9) << read_bytes(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  const std::string text = read_bytes(log);
  // Both survivors name it (each rank's error is printed), whichever collective failed.
  for (const char* survivor : {"rank 0: ", "rank 1: "}) {
    const size_t at = text.find(std::string("distributed: ") + survivor);
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_NE(text.substr(at, text.find('\n', at) - at).find("rank 2 of 3 is lost"),
              std::string::npos)
        << text;
  }
  EXPECT_NE(text.find("rank 2 of 3 was killed by signal 9"), std::string::npos) << text;
  // The last checkpoint is whole, and resumable.
  EXPECT_NO_THROW(json::parse(read_bytes(state)));
  EXPECT_TRUE(fs::exists(fs::path(out("killed")) / "checkpoint" / "pipeline-rank-2.state"));
}

TEST_F(DistributedTest, CtrlCStopsEveryRankAtTheSameStepWithOneCheckpoint) {
  const std::string s =
      spec("ctrl-c.json", 5000, json::array({{{"op", "repeat"}, {"count", -1}}, batch(32)}));
  const std::string o = out("ctrl-c");
  const std::string cmd =
      train("--train-spec " + s + " --model mlp --max-steps 1000000 --nproc 2 " +
            "--checkpoint-every 20 --out " + o);
  const pid_t launcher = start_job(cmd, o + ".log");
  ASSERT_GT(launcher, 0);
  const fs::path state = fs::path(o) / "checkpoint" / "state.json";
  ASSERT_TRUE(wait_for_file(state)) << read_bytes(o + ".log");
  ::kill(-launcher, SIGINT);  // what Ctrl-C does: every process of the job gets it
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_bytes(o + ".log");
  const json sum = summary(o);
  EXPECT_EQ(sum["stop_reason"], "interrupted");
  const int64_t steps = sum["steps"].get<int64_t>();
  EXPECT_EQ(json::parse(read_bytes(state))["step"].get<int64_t>(), steps);
  EXPECT_EQ(sum["ranks_identical"], true);
  Ran more = sh(train("--train-spec " + s + " --model mlp --nproc 2 --resume --max-steps " +
                      std::to_string(steps + 10) + " --out " + o));
  ASSERT_EQ(more.status, 0) << more.output;
  EXPECT_EQ(summary(o)["steps"].get<int64_t>(), steps + 10);
}

TEST_F(DistributedTest, BadLaunchConfigurationsGetClearErrors) {
  const std::string s = spec("bad.json", 512, json::array({batch(32)}));
  const std::string t = train("--train-spec " + s + " --model mlp --max-steps 5");
  struct Case {
    std::string env, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"WORLD_SIZE=2 RANK=0 MASTER_PORT=1234", "MASTER_ADDR is not set"},
           {"WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1", "MASTER_PORT is not set"},
           {"WORLD_SIZE=2 RANK=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234",
            "RANK=2 is not below WORLD_SIZE=2"},
           {"RANK=1", "RANK is set but WORLD_SIZE is not"},
           {"WORLD_SIZE=two RANK=0", "WORLD_SIZE=two: expected an integer"},
       }) {
    Ran r = sh("env " + c.env + " " + t);
    EXPECT_NE(r.status, 0) << c.env;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.env << "\n" << r.output;
  }
  Ran both =
      sh("env WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 " + t + " --nproc 2");
  EXPECT_NE(both.output.find("--nproc starts its own ranks"), std::string::npos) << both.output;

  // A port in use: rank 0 cannot host the rendezvous.
  Ran busy =
      sh("python3 -c 'import socket,subprocess,sys,os\n"
         "s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); p=s.getsockname()[1]\n"
         "e=dict(os.environ, WORLD_SIZE=\"2\", RANK=\"0\", MASTER_ADDR=\"127.0.0.1\", "
         "MASTER_PORT=str(p), DATAECHO_DIST_TIMEOUT=\"5\")\n"
         "sys.exit(subprocess.call(sys.argv[1], shell=True, env=e))' '" +
         t + "'");
  EXPECT_NE(busy.status, 0);
  EXPECT_NE(busy.output.find("rank 0 cannot host the rendezvous"), std::string::npos)
      << busy.output;

  // Ranks started with different world sizes.
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  Ran mixed = sh("(env WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                 " DATAECHO_DIST_TIMEOUT=10 " + t + " & env WORLD_SIZE=3 RANK=1 " +
                 "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " DATAECHO_DIST_TIMEOUT=10 " + t +
                 "; wait)");
  EXPECT_NE(mixed.output.find("was started with WORLD_SIZE=3 and rank 0 with WORLD_SIZE=2"),
            std::string::npos)
      << mixed.output;
}

}  // namespace
