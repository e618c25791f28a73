// Brace patterns over s3:// list their prefixes several at a time ("s3": {"list_parallelism"}),
// against the real S3 test server: the URIs are the serial listing's, in the pattern's
// order; every page is one counted request; the first prefix that fails (in the pattern's
// order) is the one named.
#include <gtest/gtest.h>

#include <filesystem>

#include "dataecho/core/stats.h"
#include "dataecho/io/byte_stream.h"
#include "io/s3_test_env.h"
#include "s3_server.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

using nlohmann::json;

constexpr int kPrefixes = 12;

// The .bin keys under prefix i of bucket "lists" (2, 4 or 6), and all its keys with k0.txt: 3,
// 5 or 7, never a multiple of the 2-key pages, so that each listing's pages are known.
int bins_under(int i) { return 2 + 2 * (i % 3); }
int keys_under(int i) { return bins_under(i) + 1; }
int pages_of(int i) { return (keys_under(i) + 1) / 2; }

std::string prefix_name(int i) { return (i < 10 ? "p0" : "p") + std::to_string(i); }

// Bucket "lists": p00/ ... p11/, each holding bins_under(i) small objects k0.bin, k1.bin, ...
// and one k0.txt; the environment's credentials the server's key pair.
class S3List : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kPrefixes; ++i) {
      const std::string folder = dir_ + "/" + prefix_name(i);
      std::filesystem::create_directories(folder);
      for (int k = 0; k < bins_under(i); ++k)
        write_file(folder + "/k" + std::to_string(k) + ".bin", std::string(1 + k + i, 'x'));
      write_file(folder + "/k0.txt", "text\n");
    }
    server_.start();
    server_.create_bucket("lists");
    server_.upload("lists", dir_, "");
    proxy_.start(server_);
    env_.set("AWS_ACCESS_KEY_ID", server_.access_key_id());
    env_.set("AWS_SECRET_ACCESS_KEY", server_.secret_access_key());
  }

  // Options listing through the proxy with pages of 2 keys, `parallelism` prefixes at
  // once, counted on a node of their own.
  static StreamOptions options(const std::string& endpoint, int parallelism) {
    StreamOptions o;
    o.s3.endpoint = endpoint;
    o.s3.max_keys = 2;
    o.s3.list_parallelism = parallelism;
    o.backoff_initial_s = 0.01;
    o.stats = std::make_shared<NodeStats>("0:files");
    return o;
  }

  std::string dir_ = temp_dir();
  ScopedAwsEnv env_;
  S3Server server_;
  S3FaultProxy proxy_;
};

TEST_F(S3List, BracePrefixesListedInParallelEqualTheSerialListing) {
  const std::vector<std::string> patterns = {"s3://lists/p{00..11}/", "s3://lists/{p03,p01}/*.bin",
                                             "s3://lists/p00/k0.txt"};
  StreamOptions serial = options(proxy_.endpoint(), 1);
  const std::vector<std::string> want = expand_uris(patterns, "", serial);
  // Per prefix: its keys, in pages of 2 (3, 5 or 7 keys: 2, 3 or 4 pages); a glob lists
  // the prefix before its first '*'.
  int pages = 0, keys = 0;
  for (int i = 0; i < kPrefixes; ++i) pages += pages_of(i), keys += keys_under(i);
  const int listed_pages = pages + pages_of(3) + pages_of(1);
  ASSERT_EQ(want.size(), static_cast<size_t>(keys + bins_under(3) + bins_under(1) + 1));
  EXPECT_EQ(want.front(), "s3://lists/p00/k0.bin");
  EXPECT_EQ(want[keys], "s3://lists/p03/k0.bin");  // the pattern's order, not sorted across
  EXPECT_EQ(want.back(), "s3://lists/p00/k0.txt");
  EXPECT_EQ(serial.stats->counters()["s3_list_requests"], listed_pages);
  // 8 at once (the default): fewer threads than prefixes, so each lists several.
  proxy_.clear();
  StreamOptions o = options(proxy_.endpoint(), 8);
  EXPECT_EQ(expand_uris(patterns, "", o), want);
  EXPECT_EQ(o.stats->counters()["s3_list_requests"], listed_pages);
  EXPECT_EQ(proxy_.requests().size(), static_cast<size_t>(listed_pages));
}

TEST_F(S3List, PrefixesAreListedAtTheSameTime) {
  // p00's first page is answered 503 SlowDown twice (at least 0.6 s of backoff): listed
  // one prefix after the other, every p01 request comes after p00's listing; listed
  // together, p01's first page is asked for while p00 waits.
  const auto p01_before_p00_is_listed = [&](int parallelism) {
    proxy_.clear();
    proxy_.fault({.kind = "slowdown", .query = "prefix=p00%2F", .times = 2});
    StreamOptions o = options(proxy_.endpoint(), parallelism);
    o.backoff_initial_s = 0.4;
    o.backoff_max_s = 0.8;
    EXPECT_EQ(expand_uris({"s3://lists/{p00,p01}/"}, "", o).size(),
              static_cast<size_t>(keys_under(0) + keys_under(1)));
    EXPECT_EQ(o.stats->counters()["s3_retries_slowdown"], 2);
    std::vector<std::string> order;
    for (const ProxiedRequest& r : proxy_.requests())
      order.push_back(r.target.find("prefix=p00%2F") != std::string::npos ? "p00 " + r.answer
                                                                          : "p01");
    const auto first_p01 = std::find(order.begin(), order.end(), "p01");
    const auto p00_listed = std::find(order.begin(), order.end(), "p00 forwarded");
    return first_p01 < p00_listed;
  };
  EXPECT_FALSE(p01_before_p00_is_listed(1));
  EXPECT_TRUE(p01_before_p00_is_listed(2));
}

TEST_F(S3List, TheFirstPrefixThatFailsInThePatternsOrderIsNamed) {
  // p07's listing denied, and a bucket that does not exist after it: p07 is named, at
  // every parallelism, as the serial listing names it.
  proxy_.fault({.kind = "denied", .query = "prefix=p07%2F", .times = -1});
  for (int parallelism : {1, 4, 8}) {
    SCOPED_TRACE(parallelism);
    StreamOptions o = options(proxy_.endpoint(), parallelism);
    const std::string e =
        error_of([&] { expand_uris({"s3://{lists,nobucket}/p{00..11}/"}, "", o); });
    EXPECT_CONTAINS(e, "access denied");
    EXPECT_CONTAINS(e, "HTTP 403 AccessDenied");
    EXPECT_CONTAINS(e, "(s3://lists/p07/)");
  }
  StreamOptions o = options(proxy_.endpoint(), 8);
  const std::string e = error_of([&] { expand_uris({"s3://{lists,nobucket}/p00/"}, "", o); });
  EXPECT_CONTAINS(e, "no such bucket (HTTP 404 NoSuchBucket");
  EXPECT_CONTAINS(e, "(s3://nobucket/p00/)");
  // A pattern that lists nothing names itself and its prefix.
  EXPECT_CONTAINS(error_of([&] { expand_uris({"s3://lists/{p02,p03}/*.png"}, "", o); }),
                  "matches no key (7 listed under s3://lists/p02/) (s3://lists/p02/*.png)");
}

TEST_F(S3List, ListParallelismAndMaxKeysAreSpecOptions) {
  const auto source = [&](json s3) {
    s3["endpoint"] = server_.endpoint();
    return json{{"seed", 1},
                {"source", {{"kind", "files"}, {"uri", "s3://lists/p{00..11}/*.bin"}, {"s3", s3}}},
                {"stages", json::array()}}
        .dump();
  };
  size_t bins = 0, keys = 0;
  for (int i = 0; i < kPrefixes; ++i) bins += bins_under(i), keys += keys_under(i);
  EXPECT_EQ(run(source({{"list_parallelism", 3}, {"max_keys", 1}})).size(), bins);
  for (const json& bad : {json{{"list_parallelism", 0}}, json{{"list_parallelism", 65}}})
    EXPECT_CONTAINS(error_of([&] { build(source(bad)); }),
                    "source.s3.list_parallelism: expected an integer in [1, 64]");
  EXPECT_CONTAINS(error_of([&] {
                    build(source({{"max_keys", 1001}}));
                  }),
                  "source.s3.max_keys: expected an integer in [1, 1000]");
  // Set in C++, out of range: max_keys refused before any request, list_parallelism
  // taken into [1, 64].
  StreamOptions o = options(proxy_.endpoint(), 0);
  o.s3.max_keys = 1000;
  EXPECT_EQ(expand_uris({"s3://lists/p{00..11}/"}, "", o).size(), keys);
  o.s3.list_parallelism = 1000;
  EXPECT_EQ(expand_uris({"s3://lists/p{00..11}/"}, "", o).size(), keys);
  o.s3.max_keys = 0;
  proxy_.clear();
  EXPECT_CONTAINS(error_of([&] { expand_uris({"s3://lists/p00/"}, "", o); }),
                  "max_keys must be in [1, 1000], got 0 (s3://lists/p00/)");
  EXPECT_TRUE(proxy_.requests().empty());
}

}  // namespace
}  // namespace dataecho::testing
