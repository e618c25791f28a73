// What the data-parallel tests share: running `dataecho-train` as a shell command, and
// reading what a run wrote (its losses, summary and read sets). Real ranks as processes,
// on c10d's Gloo over loopback; two or three ranks fit the 2-core CI machine.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_util.h"
#include "test_util.h"

namespace distributed_testing {
namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kBin = DATAECHO_TRAIN_BIN;
inline const std::string kFashion = "/usr/share/datasets/fashion-mnist";

struct Ran {
  int status = -1;  // the shell's exit status
  std::string output;
  double seconds = 0;
};

// Runs a shell command line; its stdout and stderr together.
inline Ran sh(const std::string& command) {
  Ran r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The losses of every step so far, from the run's checkpoint.
inline std::vector<float> losses(const fs::path& out) {
  const std::string b = read_bytes(out / "checkpoint" / "losses.bin");
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

inline json summary(const fs::path& out) { return json::parse(read_bytes(out / "summary.json")); }

// The (id, epoch) pairs trained on, from a checkpoint's read set.
inline std::set<std::pair<int64_t, int32_t>> read_set(const fs::path& file) {
  const auto pairs = process_testing::read_pairs(file);
  return {pairs.begin(), pairs.end()};
}

class DistributedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kFashion + "/train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    dir_ = dataecho::testing::temp_dir();
  }
  // A training spec over the first `limit` Fashion-MNIST images, with `stages`.
  std::string spec(const std::string& name, int64_t limit, const json& stages, bool seeded = true) {
    json j = {{"source",
               {{"kind", "idx"},
                {"images", kFashion + "/train-images-idx3-ubyte.gz"},
                {"labels", kFashion + "/train-labels-idx1-ubyte.gz"},
                {"limit", limit}}},
              {"stages", stages}};
    if (seeded) j["seed"] = 3;
    const fs::path p = fs::path(dir_) / name;
    std::ofstream(p) << j.dump(1);
    return p.string();
  }
  std::string out(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string train(const std::string& args) const {
    return kBin + " train --progress off --eval-every 0 " + args;
  }
  std::string dir_;
};

inline json batch(int64_t size, bool drop_remainder = true) {
  return {{"op", "batch"}, {"size", size}, {"drop_remainder", drop_remainder}};
}

}  // namespace distributed_testing
