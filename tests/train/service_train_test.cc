// The trainer over a data service (docs/service.md): `dataecho-train` on a spec whose
// source is a service source in sharding "dynamic", each of its 2 ranks a consumer of
// the job, with a `dataecho dispatcher` and a `dataecho worker` process on 127.0.0.1.
// SIGKILLed mid-epoch and resumed from its last checkpoint, the epoch's fresh keys are
// each of the source's ids once. Skipped without the gRPC plugin, the dataecho command or
// the Fashion-MNIST images.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "process_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using process_testing::start_job;

const std::string kBinDir = std::string(DATAECHO_BINARY_DIR) + "/bin/";
const std::string kFashion = "/usr/share/datasets/fashion-mnist";

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// SIGKILL to the job's whole process group, and waits for it.
void kill_job(pid_t job) {
  ::kill(-job, SIGKILL);
  ::waitpid(job, nullptr, 0);
}

// A server process (`dataecho dispatcher` or `worker`) and the address in its first line
// of output ("listening on A", "worker w1 serving on A").
class Server {
 public:
  Server(const std::vector<std::string>& argv, const std::string& log) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = dataecho::testing::spawn_tied(argv, {-1, out[1], err});
    ::close(out[1]);
    ::close(err);
    std::string line;
    char c;
    pollfd p{out[0], POLLIN, 0};
    while (::poll(&p, 1, 20'000) > 0 && ::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    out_ = out[0];
    address = line.substr(line.rfind(' ') + 1);
  }
  ~Server() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(out_);
  }
  std::string address;

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// 1,200 images: 24 pieces of 50 over 6 lanes, 600 for each of the 2 ranks, 30 steps of
// 20 each; the workers' upstream sleeps 2 ms an image, so the run is still in its epoch
// when the checkpoint of step 20 appears.
TEST(Service, TrainerSigkilledAndResumed) {
  if (!fs::exists(kBinDir + "dataecho") || !fs::exists(kBinDir + "dataecho-train"))
    GTEST_SKIP() << "this build has no dataecho or dataecho-train command";
  if (!fs::exists(std::string(DATAECHO_BINARY_DIR) + "/libdataecho_grpc.so"))
    GTEST_SKIP() << "this build has no gRPC plugin";
  if (!fs::exists(kFashion + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = dataecho::testing::temp_dir();
  Server dispatcher({kBinDir + "dataecho", "dispatcher", "--port", "0", "--bind", "127.0.0.1"},
                    dir + "/dispatcher.log");
  ASSERT_NE(dispatcher.address.find("127.0.0.1:"), std::string::npos)
      << read_bytes(dir + "/dispatcher.log");
  Server worker(
      {kBinDir + "dataecho", "worker", "--dispatcher", dispatcher.address, "--bind", "127.0.0.1"},
      dir + "/worker.log");
  ASSERT_NE(worker.address.find("127.0.0.1:"), std::string::npos)
      << read_bytes(dir + "/worker.log");
  const json upstream = {{"source",
                          {{"kind", "idx"},
                           {"images", kFashion + "/train-images-idx3-ubyte.gz"},
                           {"labels", kFashion + "/train-labels-idx1-ubyte.gz"},
                           {"limit", 1200}}},
                         {"stages", {{{"op", "map"}, {"fn", "sleep"}, {"args", {{"ms", 2}}}}}}};
  const json spec = {{"source",
                      {{"kind", "service"},
                       {"dispatcher", dispatcher.address},
                       {"job", "train"},
                       {"sharding", "dynamic"},
                       {"lanes", 6},
                       {"connect_timeout_s", 20},
                       {"pipeline", upstream}}},
                     {"stages", {{{"op", "batch"}, {"size", 20}}}}};
  std::ofstream(dir + "/spec.json") << spec.dump(1);
  const std::string out = dir + "/run";
  const std::string train = kBinDir + "dataecho-train train --progress off --eval-every 0 " +
                            "--train-spec " + dir + "/spec.json --model mlp --lr 0.05 --seed 7 " +
                            "--nproc 2 --checkpoint-every 10 --out " + out;
  const pid_t job = start_job(train, dir + "/killed.log");
  const fs::path state = fs::path(out) / "checkpoint" / "state.json";
  int64_t step = 0;
  for (int i = 0; i < 1200 && step < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (fs::exists(state)) step = json::parse(read_bytes(state)).value("step", int64_t{0});
  }
  kill_job(job);
  ASSERT_EQ(step, 20) << read_bytes(dir + "/killed.log");
  ASSERT_FALSE(fs::exists(fs::path(out) / "summary.json")) << "the run ended before its kill";
  const pid_t resumed = start_job(train + " --resume", dir + "/resumed.log");
  int status = 0;
  ::waitpid(resumed, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_bytes(dir + "/resumed.log");
  const json summary = json::parse(read_bytes(fs::path(out) / "summary.json"));
  EXPECT_EQ(summary["steps"], 30) << summary.dump();
  EXPECT_EQ(summary["fresh"], 1200) << summary.dump();
  EXPECT_EQ(summary["echoed"], 0) << summary.dump();
  EXPECT_EQ(summary["stop_reason"], "end_of_data") << summary.dump();
  std::multiset<std::pair<int64_t, int32_t>> keys;
  for (int r = 0; r < 2; ++r) {
    const auto rank = process_testing::read_pairs(
        fs::path(out) / "checkpoint" / ("fresh_keys-rank-" + std::to_string(r) + ".bin"));
    keys.insert(rank.begin(), rank.end());
  }
  ASSERT_EQ(keys.size(), 1200u);
  int64_t id = 0;
  for (const auto& [key, epoch] : keys) {
    EXPECT_EQ(key, id++);
    EXPECT_EQ(epoch, 0);
  }
  // The service shares the data between the ranks: elastic sharding is refused.
  const pid_t elastic = start_job(kBinDir + "dataecho-train train --progress off --train-spec " +
                                      dir + "/spec.json --model mlp --sharding elastic --lanes 6 " +
                                      "--max-steps 1 --out " + dir + "/elastic",
                                  dir + "/elastic.log");
  ::waitpid(elastic, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  EXPECT_NE(read_bytes(dir + "/elastic.log").find("leave --sharding at files"), std::string::npos)
      << read_bytes(dir + "/elastic.log");
}

}  // namespace
