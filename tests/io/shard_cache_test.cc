// Remote shards kept on local disk (io/shard_cache.h), against a real nginx: each shard
// fetched once and read locally after (nginx's access log counts the GETs), a changed
// shard fetched again, eviction under the bound, two processes sharing one folder, a
// partial download never read, and a complete copy read while the server is down.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include <gtest/gtest.h>

#include "dataecho/formats/tfrecord.h"
#include "io/sha256.h"
#include "nginx_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

namespace fs = std::filesystem;
using testing::NginxServer;

class ShardCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::temp_dir();
    cache_ = testing::temp_dir() + "/cache";
    for (int s = 0; s < 4; ++s) write_shard(s, 20 + s);
    testing::NginxServerOptions options;
    options.access_log = true;
    server_.start(root_, options);
  }
  void write_shard(int shard, int records, uint64_t seed = 1) {
    std::mt19937_64 rng(seed * 100 + static_cast<uint64_t>(shard));
    TfRecordWriter w(root_ + "/train-" + std::to_string(shard) + ".tfrecord");
    for (int i = 0; i < records; ++i) {
      std::string rec(2000 + rng() % 3000, '\0');
      for (auto& c : rec) c = static_cast<char>(rng());
      w.write(rec);
    }
    w.close();
  }
  std::string spec(const std::string& base, int64_t max_bytes = 0, int retries = 8,
                   double revalidate_s = -1) const {
    nlohmann::json s = {{"source",
                         {{"kind", "tfrecord"},
                          {"uri", base + "/train-{0..3}.tfrecord"},
                          {"raw", true},
                          {"cache_dir", cache_},
                          {"http", {{"max_retries", retries}, {"backoff_initial_s", 0.05}}}}}};
    if (max_bytes > 0) s["source"]["cache_max_bytes"] = max_bytes;
    if (revalidate_s >= 0) s["source"]["cache_revalidate_s"] = revalidate_s;
    return s.dump();
  }
  // A manifest in the served folder listing the four shards with `#sha256=` fragments;
  // shard `wrong`'s digest is that of other bytes. Returns the spec's `uri`.
  std::string manifest(int wrong = -1) const {
    std::ofstream m(root_ + "/train.manifest");
    for (int s = 0; s < 4; ++s) {
      std::ifstream f(root_ + "/train-" + std::to_string(s) + ".tfrecord", std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)), {});
      if (s == wrong) bytes += "x";
      Sha256 h;
      h.update(bytes.data(), bytes.size());
      m << "train-" << s << ".tfrecord#sha256=" << h.hex_digest() << "\n";
    }
    return std::string("@") + remote() + "/train.manifest";
  }
  std::string spec_for(const std::string& uri, bool cache) const {
    nlohmann::json s = nlohmann::json::parse(spec(""));
    s["source"]["uri"] = uri;
    if (!cache) s["source"].erase("cache_dir");
    return s.dump();
  }
  std::string remote() const { return server_.url("").substr(0, server_.url("").size() - 1); }
  std::vector<std::string> records(const std::string& s,
                                   std::map<std::string, int64_t>* counters = nullptr) {
    auto p = testing::build(s);
    std::vector<std::string> out;
    for (const auto& e : testing::drain(*p)) out.emplace_back(e.get("record").bytes());
    if (counters)
      *counters = p->stats().to_json()[0]["counters"].get<std::map<std::string, int64_t>>();
    return out;
  }
  std::vector<std::string> local() {
    nlohmann::json s = {
        {"source",
         {{"kind", "tfrecord"}, {"uri", root_ + "/train-{0..3}.tfrecord"}, {"raw", true}}}};
    return records(s.dump());
  }
  // GET (or other `method`) requests nginx logged for shard `shard`.
  int gets(int shard, const std::string& method = "GET") const {
    std::ifstream f(server_.access_log_path());
    const std::string needle = "\"" + method + " /train-" + std::to_string(shard) + ".tfrecord ";
    int n = 0;
    for (std::string line; std::getline(f, line);) n += line.find(needle) != std::string::npos;
    return n;
  }
  int64_t shard_bytes() const {
    int64_t total = 0;
    for (const auto& f : fs::directory_iterator(cache_))
      if (f.path().extension() == ".shard") total += static_cast<int64_t>(fs::file_size(f.path()));
    return total;
  }

  std::string root_, cache_;
  NginxServer server_;
};

TEST_F(ShardCacheTest, EachShardIsFetchedOnceThenReadLocally) {
  std::map<std::string, int64_t> c;
  EXPECT_EQ(records(spec(remote()), &c), local());
  EXPECT_EQ(c["cache_misses"], 4);
  EXPECT_GT(c["cache_bytes_fetched"], 0);
  EXPECT_EQ(records(spec(remote()), &c), local());
  EXPECT_EQ(c["cache_hits"], 4);
  EXPECT_EQ(c.count("cache_misses"), 0u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(gets(s), 1) << "shard " << s;
}

TEST_F(ShardCacheTest, AShardChangedOnTheServerIsFetchedAgain) {
  records(spec(remote()));
  write_shard(2, 25, /*seed=*/9);  // other bytes, other length: another ETag
  std::map<std::string, int64_t> c;
  // Asked at once (cache_revalidate_s 0): within the default 60 s the copy is read as is.
  EXPECT_EQ(records(spec(remote(), 0, 8, /*revalidate_s=*/0), &c), local());
  EXPECT_EQ(c["cache_misses"], 1);
  EXPECT_EQ(c["cache_hits"], 3);
  EXPECT_EQ(gets(2), 2);
}

TEST_F(ShardCacheTest, AShardFoundCurrentRecentlyIsReadWithoutAskingTheServer) {
  records(spec(remote()));
  for (int s = 0; s < 4; ++s) EXPECT_EQ(gets(s, "HEAD"), 1) << "shard " << s;
  records(spec(remote()));  // within cache_revalidate_s (60 s): no request at all
  for (int s = 0; s < 4; ++s) EXPECT_EQ(gets(s, "HEAD"), 1) << "shard " << s;
  records(spec(remote(), 0, 8, /*revalidate_s=*/0));  // 0: every open asks
  for (int s = 0; s < 4; ++s) EXPECT_EQ(gets(s, "HEAD"), 2) << "shard " << s;
  for (int s = 0; s < 4; ++s) EXPECT_EQ(gets(s), 1) << "shard " << s;
}

TEST_F(ShardCacheTest, TheLeastRecentlyUsedShardsAreEvictedUnderTheBound) {
  const int64_t one = static_cast<int64_t>(fs::file_size(root_ + "/train-3.tfrecord"));
  std::map<std::string, int64_t> c;
  EXPECT_EQ(records(spec(remote(), 2 * one), &c), local());
  EXPECT_GE(c["cache_evictions"], 2);
  EXPECT_LE(shard_bytes(), 2 * one);
  EXPECT_EQ(records(spec(remote(), 2 * one), &c), local());  // still whole, refetching the evicted
}

TEST_F(ShardCacheTest, TwoProcessesShareOneFolderAndFetchEachShardOnce) {
  const std::string s = spec(remote());
  const size_t expected = local().size();
  std::vector<pid_t> children;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 1;
      try {
        rc = records(s).size() == expected ? 0 : 2;
      } catch (...) {
        rc = 3;
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  for (int s2 = 0; s2 < 4; ++s2) EXPECT_EQ(gets(s2), 1) << "shard " << s2;
}

TEST_F(ShardCacheTest, APartialDownloadIsNeverRead) {
  records(spec(remote()));
  // A download cut short (its temporary file) and a shard cut short in place.
  for (const auto& f : fs::directory_iterator(cache_)) {
    if (f.path().extension() == ".shard") {
      std::ofstream(f.path().string() + ".tmp-1-2") << "partial";
      fs::resize_file(f.path(), fs::file_size(f.path()) / 2);
      break;
    }
  }
  std::map<std::string, int64_t> c;
  EXPECT_EQ(records(spec(remote()), &c), local());
  EXPECT_EQ(c["cache_misses"], 1);
}

TEST_F(ShardCacheTest, AWholeCopyIsReadWhileTheServerIsDown) {
  records(spec(remote()));
  const std::string base = remote();
  server_.stop();
  EXPECT_EQ(records(spec(base, 0, /*retries=*/0)), local());
  // Without a copy, the error names the URL.
  fs::remove_all(cache_);
  const std::string msg = testing::error_of([&] { records(spec(base, 0, 0)); });
  EXPECT_NE(msg.find("/train-0.tfrecord"), std::string::npos) << msg;
}

TEST(Sha256, KnownDigests) {  // FIPS 180-4's examples
  auto digest = [](const std::string& s, int repeat = 1) {
    Sha256 h;
    for (int i = 0; i < repeat; ++i) h.update(s.data(), s.size());
    return h.hex_digest();
  };
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest("a", 1000000),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_F(ShardCacheTest, AManifestsChecksumsAreCheckedOnDownload) {
  std::map<std::string, int64_t> c;
  EXPECT_EQ(records(spec_for(manifest(), true), &c), local());
  EXPECT_EQ(c["cache_misses"], 4);
  EXPECT_EQ(records(spec_for(manifest(), true), &c), local());
  EXPECT_EQ(c["cache_hits"], 4);
  // Another digest for shard 1: its copy is not that shard; the download is not kept.
  const std::string msg = testing::error_of([&] { records(spec_for(manifest(1), true)); });
  EXPECT_NE(msg.find("sha256"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/train-1.tfrecord#sha256="), std::string::npos) << msg;
  for (const auto& f : fs::directory_iterator(cache_))
    EXPECT_EQ(f.path().string().find(".tmp-"), std::string::npos) << f.path();
  EXPECT_EQ(gets(1), 2);  // the fragment is not sent: the same path both times
}

TEST_F(ShardCacheTest, WithoutACacheTheChecksumIsCheckedAtTheEndOfEachShard) {
  EXPECT_EQ(records(spec_for(manifest(), false)), local());
  const std::string msg = testing::error_of([&] { records(spec_for(manifest(2), false)); });
  EXPECT_NE(msg.find("the data's sha256 is"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/train-2.tfrecord"), std::string::npos) << msg;
  const std::string bad = remote() + "/train-0.tfrecord#sha256=abc";
  for (bool cache : {false, true}) {
    const std::string m = testing::error_of([&] { records(spec_for(bad, cache)); });
    EXPECT_NE(m.find("64 hex digits"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace dataecho
