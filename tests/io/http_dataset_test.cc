// A TFRecord dataset read over HTTP (a real nginx) against the same shards read locally:
// same ids, same bytes; and an epoch that survives nginx being stopped and restarted.
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "dataecho/formats/tfrecord.h"
#include "nginx_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::NginxServer;
using testing::NginxServerOptions;

struct Record {
  int64_t id;
  std::string bytes;
};

std::vector<Record> records_of(const std::vector<Example>& v) {
  std::vector<Record> out;
  for (const auto& e : v) out.push_back({e.id(), std::string(e.get("record").bytes())});
  return out;
}

// Four shards of records of random sizes (0 to 40 KB), about 2.5 MB in all.
class HttpDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir();
    std::mt19937_64 rng(42);
    for (int shard = 0; shard < 4; ++shard) {
      char name[64];
      std::snprintf(name, sizeof(name), "train-%05d-of-00004.tfrecord", shard);
      names_.push_back(name);
      TfRecordWriter w(dir_ + "/" + name);
      for (int i = 0; i < 30; ++i) {
        std::string rec(rng() % 40000, '\0');
        for (auto& c : rec) c = static_cast<char>(rng());
        w.write(rec);
        ++records_;
      }
      w.close();
    }
  }

  std::string spec(const std::vector<std::string>& uris, bool interleave) const {
    nlohmann::json s = {{"seed", 3},
                        {"source", {{"kind", "tfrecord"}, {"uri", uris}, {"raw", true}}},
                        {"stages", nlohmann::json::array()}};
    if (interleave) s["stages"].push_back({{"op", "interleave"}, {"cycle", 3}});
    return s.dump();
  }
  std::vector<std::string> local_uris() const {
    std::vector<std::string> v;
    for (const auto& n : names_) v.push_back(dir_ + "/" + n);
    return v;
  }
  std::vector<std::string> http_uris() const {
    std::vector<std::string> v;
    for (const auto& n : names_) v.push_back(nginx_.url(n));
    return v;
  }

  std::string dir_;
  std::vector<std::string> names_;
  int64_t records_ = 0;
  NginxServer nginx_;
};

void expect_same(const std::vector<Record>& a, const std::vector<Record>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id) << "element " << i;
    EXPECT_TRUE(a[i].bytes == b[i].bytes) << "element " << i << " bytes differ";
  }
}

TEST_F(HttpDatasetTest, OverHttpSameIdsAndBytesAsLocal) {
  nginx_.start(dir_);
  for (bool interleave : {false, true}) {
    auto local = records_of(testing::run(spec(local_uris(), interleave)));
    auto remote = records_of(testing::run(spec(http_uris(), interleave)));
    EXPECT_EQ(static_cast<int64_t>(local.size()), records_);
    expect_same(remote, local);
  }
  // A brace range over URLs expands like a local one.
  auto braced =
      records_of(testing::run(spec({nginx_.url("train-{00000..00003}-of-00004.tfrecord")}, false)));
  expect_same(braced, records_of(testing::run(spec(local_uris(), false))));
}

TEST_F(HttpDatasetTest, EpochSurvivesNginxStoppedAndRestarted) {
  NginxServerOptions slow;
  slow.limit_rate = "400k";  // about 2 s per shard with three at a time
  nginx_.start(dir_, slow);
  auto local = records_of(testing::run(spec(local_uris(), true)));
  auto pipeline = testing::build(spec(http_uris(), true));
  // Read a little, stop nginx, read on while it is down, restart it.
  std::string error;
  std::vector<Example> got = testing::read_through_restart(*pipeline, nginx_, 10, error);
  ASSERT_EQ(error, "");
  expect_same(records_of(got), local);  // every record exactly once, in the same order
}

TEST_F(HttpDatasetTest, MissingShardFailsWithUrlAndStatus) {
  nginx_.start(dir_);
  std::string url = nginx_.url("train-00009-of-00004.tfrecord");
  std::string msg = testing::error_of([&] { testing::run(spec({url}, false)); });
  EXPECT_NE(msg.find("404"), std::string::npos) << msg;
  EXPECT_NE(msg.find(url), std::string::npos) << msg;
}

}  // namespace
}  // namespace dataecho
