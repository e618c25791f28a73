// s3:// read by the engine from the real S3 test server (signatures verified by it),
// against the same files read locally; through the fault proxy, S3's error answers
// retried or named. Fixtures are uploaded by boto3 (an independent client).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "dataecho/core/error.h"
#include "dataecho/core/example_json.h"
#include "dataecho/core/pipeline.h"
#include "dataecho/core/stats.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/io/byte_stream.h"
#include "io/s3_stream.h"
#include "io/s3_test_env.h"
#include "s3_server.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

using nlohmann::json;

// Random bytes of a fixed seed.
std::string bytes_of(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An IDX file: the magic for unsigned bytes, big-endian dims, then the data.
std::string idx_file(const std::vector<int32_t>& dims, const std::string& data) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (int32_t d : dims)
    for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
  return s + data;
}

// TFRecord shard `shard`: 20 records of 0 to 20 KB, their sizes fixed by the shard, their
// bytes by the shard and `version` (another version: the same length, other bytes).
void write_shard(const std::string& path, int shard, uint64_t version) {
  std::mt19937_64 sizes(5 + shard);
  TfRecordWriter w(path);
  for (int i = 0; i < 20; ++i)
    w.write(bytes_of(sizes() % 20000, 1000 * shard + i + (version << 32)));
  w.close();
}

// Writes the fixtures of every source kind under `dir`: set/train-{0..2}.tfrecord (20
// records each, 0 to 20 KB), set/shard.tar (GNU tar, 12 samples), set/lines.txt,
// set/images and set/labels (IDX), set/.hidden, and set/list.txt (a manifest of two
// shards, one relative, one from the bucket's root).
void write_fixtures(const std::string& dir) {
  std::filesystem::create_directories(dir + "/set");
  for (int shard = 0; shard < 3; ++shard)
    write_shard(dir + "/set/train-" + std::to_string(shard) + ".tfrecord", shard, 0);
  for (int i = 0; i < 12; ++i) {
    write_file(dir + "/tar/s" + std::to_string(i) + ".bin", bytes_of(100 + 700 * i, i));
    write_file(dir + "/tar/s" + std::to_string(i) + ".cls", std::to_string(i % 4) + "\n");
  }
  const std::string tar = "tar --sort=name -cf " + dir + "/set/shard.tar -C " + dir + "/tar .";
  ASSERT_EQ(std::system(tar.c_str()), 0) << tar;
  std::string lines;
  for (int i = 0; i < 50; ++i) lines += "line " + std::to_string(i) + " of the text\n";
  write_file(dir + "/set/lines.txt", lines);
  std::string images, labels;
  for (int i = 0; i < 9; ++i) {
    images += bytes_of(16, 100 + i);
    labels.push_back(static_cast<char>(i % 5));
  }
  write_file(dir + "/set/images", idx_file({9, 4, 4}, images));
  write_file(dir + "/set/labels", idx_file({9}, labels));
  write_file(dir + "/set/.hidden", "not matched by *\n");
  write_file(dir + "/set/list.txt", "# two shards\ntrain-2.tfrecord\n/set/train-0.tfrecord\n");
}

// A server holding the fixtures as s3://data/set/..., the environment's credentials its
// key pair, and the same files locally under dir_.
class S3Read : public ::testing::Test {
 protected:
  void SetUp() override {
    write_fixtures(dir_);
    server_.start();
    server_.create_bucket("data");
    server_.upload("data", dir_ + "/set", "set/");
    env_.set("AWS_ACCESS_KEY_ID", server_.access_key_id());
    env_.set("AWS_SECRET_ACCESS_KEY", server_.secret_access_key());
  }

  // A spec of one source: `source` with, for s3:// URIs, the endpoint (the server's,
  // else the proxy's when started) and fast retries.
  std::string spec(json source) const {
    source["s3"] = {{"endpoint", proxy_.running() ? proxy_.endpoint() : server_.endpoint()}};
    source["http"] = {{"backoff_initial_s", 0.01}, {"backoff_max_s", 0.05}};
    return json{{"seed", 3}, {"source", source}, {"stages", json::array()}}.dump();
  }
  // Every element of the spec's pipeline, as JSON text.
  std::vector<std::string> elements(json source) const {
    std::vector<std::string> out;
    for (const Example& e : run(spec(std::move(source))))
      out.push_back(example_to_json(e, true).dump());
    return out;
  }
  std::string local(const std::string& name) const { return dir_ + "/set/" + name; }
  static std::string remote(const std::string& name) { return "s3://data/set/" + name; }

  std::string dir_ = temp_dir();
  ScopedAwsEnv env_;
  S3Server server_;
  S3FaultProxy proxy_;
};

TEST_F(S3Read, EverySourceKindReadsLikeLocal) {
  const std::vector<std::string> shards = {"train-0.tfrecord", "train-1.tfrecord",
                                           "train-2.tfrecord"};
  std::vector<std::string> local_uris, remote_uris;
  for (const auto& s : shards) local_uris.push_back(local(s)), remote_uris.push_back(remote(s));
  const auto tf_local = elements({{"kind", "tfrecord"}, {"uri", local_uris}, {"raw", true}});
  EXPECT_EQ(tf_local.size(), 60u);
  EXPECT_EQ(elements({{"kind", "tfrecord"}, {"uri", remote_uris}, {"raw", true}}), tf_local);
  // Brace ranges expand over s3:// as over http.
  EXPECT_EQ(
      elements({{"kind", "tfrecord"}, {"uri", remote("train-{0..2}.tfrecord")}, {"raw", true}}),
      tf_local);
  const auto tar_local = elements({{"kind", "tar"}, {"uri", local("shard.tar")}});
  EXPECT_EQ(tar_local.size(), 12u);
  EXPECT_EQ(elements({{"kind", "tar"}, {"uri", remote("shard.tar")}}), tar_local);
  const auto text_local = elements({{"kind", "text"}, {"uri", local("lines.txt")}});
  EXPECT_EQ(text_local.size(), 50u);
  EXPECT_EQ(elements({{"kind", "text"}, {"uri", remote("lines.txt")}}), text_local);
  const auto idx_local =
      elements({{"kind", "idx"}, {"images", local("images")}, {"labels", local("labels")}});
  EXPECT_EQ(idx_local.size(), 9u);
  EXPECT_EQ(elements({{"kind", "idx"}, {"images", remote("images")}, {"labels", remote("labels")}}),
            idx_local);
}

TEST_F(S3Read, SaveMidShardRestoresExactly) {
  proxy_.start(server_);
  // A read-ahead buffer (32 KB) smaller than the bytes before either save point, so that
  // the restored reads cannot find them buffered: each starts inside a shard with a signed
  // ranged GET.
  expect_save_restore_identical(spec({{"kind", "tfrecord"},
                                      {"uri", remote("train-{0..2}.tfrecord")},
                                      {"raw", true},
                                      {"buffer_bytes", 4096}}),
                                {7, 33});
  bool ranged = false;
  for (const ProxiedRequest& r : proxy_.requests()) {
    const std::string range = r.header("Range");
    if (range.rfind("bytes=", 0) == 0 && range != "bytes=0-") ranged = true;
    EXPECT_NE(r.header("Authorization"), "") << r.target;
  }
  EXPECT_TRUE(ranged);
}

// Every entry of `patterns` expanded with the spec's stream options (the server's endpoint).
std::vector<std::string> expand(const std::vector<std::string>& patterns,
                                const std::string& endpoint, const std::string& base_dir = "") {
  StreamOptions o;
  o.s3.endpoint = endpoint;
  return expand_uris(patterns, base_dir, o);
}

// `uris` with `from` replaced by `to` at their start.
std::vector<std::string> rebased(std::vector<std::string> uris, const std::string& from,
                                 const std::string& to) {
  for (std::string& u : uris)
    if (u.rfind(from, 0) == 0) u = to + u.substr(from.size());
  return uris;
}

TEST_F(S3Read, GlobsFoldersBracesAndManifestsListLikeLocal) {
  const std::string e = server_.endpoint();
  for (const std::string p : {"train-*.tfrecord", "*", "train-[02].tfrecord", "t*-?.tfrecord",
                              "{train-1,lines}.*", ".h*"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(rebased(expand({remote(p)}, e), "s3://data/set/", dir_ + "/set/"),
              expand_uris({local(p)}));
  }
  // A trailing '/' names every key under it, hidden ones too.
  EXPECT_EQ(expand({"s3://data/set/"}, e).size(), 9u);
  EXPECT_EQ(expand({"@s3://data/set/list.txt"}, e),
            (std::vector<std::string>{remote("train-2.tfrecord"), remote("train-0.tfrecord")}));
  EXPECT_CONTAINS(error_of([&] { expand({remote("nope-*")}, e); }),
                  "matches no key (0 listed under s3://data/set/nope-)");
  // A pipeline reads a listed glob as the local one.
  EXPECT_EQ(elements({{"kind", "tfrecord"}, {"uri", remote("train-*.tfrecord")}, {"raw", true}}),
            elements({{"kind", "tfrecord"}, {"uri", local("train-*.tfrecord")}, {"raw", true}}));
}

TEST_F(S3Read, ListingPaginatesWithContinuationTokens) {
  proxy_.start(server_);
  StreamOptions o;
  o.s3.endpoint = proxy_.endpoint();
  const std::vector<s3::ListedObject> all = s3::list_objects("data", "set/", o, 3);
  std::vector<std::string> keys;
  for (const auto& x : all) keys.push_back(x.key);
  EXPECT_EQ(keys.size(), 9u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(all.front().key, "set/.hidden");
  EXPECT_EQ(all.front().size, 17);
  EXPECT_EQ(all.front().etag.size(), 34u);  // a quoted MD5
  std::vector<std::string> targets;
  for (const ProxiedRequest& r : proxy_.requests()) targets.push_back(r.target);
  ASSERT_EQ(targets.size(), 3u);  // 3 + 3 + 3 keys
  EXPECT_EQ(targets[0], "/data?list-type=2&max-keys=3&prefix=set%2F");
  EXPECT_EQ(targets[1].rfind("/data?continuation-token=", 0), 0u) << targets[1];
}

TEST_F(S3Read, FilesReadsListedObjectsAndAListLikeLocal) {
  const auto glob = [](const std::string& uri) { return json{{"kind", "files"}, {"uri", uri}}; };
  const auto from_glob = elements(glob(local("train-*.tfrecord")));
  EXPECT_EQ(from_glob.size(), 3u);
  EXPECT_EQ(elements(glob(remote("train-*.tfrecord"))), from_glob);
  // A CSV list on the store; its relative paths are relative to its folder there, a path
  // starting with '/' to the bucket's root.
  write_file(local("files.csv"), "lines.txt,1\nimages,0\n");
  write_file(dir_ + "/rooted.csv", "/set/labels,2\n");
  server_.upload("data", local("files.csv"), "set/files.csv");
  server_.upload("data", dir_ + "/rooted.csv", "lists/rooted.csv");
  const auto list = [](const std::string& uri) {
    return json{{"kind", "files"}, {"list", uri}, {"header", false}};
  };
  const auto from_list = elements(list(local("files.csv")));
  EXPECT_EQ(from_list.size(), 2u);
  EXPECT_EQ(elements(list(remote("files.csv"))), from_list);
  const std::vector<Example> rooted = run(spec(list("s3://data/lists/rooted.csv")));
  ASSERT_EQ(rooted.size(), 1u);
  EXPECT_EQ(std::string(rooted[0].get("image").bytes()), slurp(local("labels")));
}

// How many requests of `method` the proxy saw for each path.
std::map<std::string, int> count_by_path(const std::vector<ProxiedRequest>& requests,
                                         const std::string& method) {
  std::map<std::string, int> n;
  for (const ProxiedRequest& r : requests)
    if (r.method == method) ++n[r.target.substr(0, r.target.find('?'))];
  return n;
}

TEST_F(S3Read, CacheFetchesEachObjectOnceAndAgainWhenItsETagChanges) {
  proxy_.start(server_);
  const std::string cache = temp_dir();
  auto source = [&](const std::string& where, double revalidate_s) {
    return json{{"kind", "tfrecord"},
                {"uri", where + "train-{0..2}.tfrecord"},
                {"raw", true},
                {"cache_dir", cache},
                {"cache_revalidate_s", revalidate_s}};
  };
  const auto want =
      elements({{"kind", "tfrecord"}, {"uri", local("train-{0..2}.tfrecord")}, {"raw", true}});
  EXPECT_EQ(elements(source("s3://data/set/", 60)), want);
  EXPECT_EQ(elements(source("s3://data/set/", 60)), want);  // checked < 60 s ago: no request
  const std::map<std::string, int> once = {{"/data/set/train-0.tfrecord", 1},
                                           {"/data/set/train-1.tfrecord", 1},
                                           {"/data/set/train-2.tfrecord", 1}};
  EXPECT_EQ(count_by_path(proxy_.requests(), "GET"), once);
  EXPECT_EQ(count_by_path(proxy_.requests(), "HEAD"), once);
  // train-1 uploaded anew (boto3): a new ETag, fetched again; the others are current.
  // Of the same length: only the ETag tells the copy is stale.
  std::filesystem::create_directories(dir_ + "/new");
  write_shard(dir_ + "/new/train-1.tfrecord", 1, 1);
  ASSERT_EQ(std::filesystem::file_size(dir_ + "/new/train-1.tfrecord"),
            std::filesystem::file_size(local("train-1.tfrecord")));
  server_.upload("data", dir_ + "/new/train-1.tfrecord", "set/train-1.tfrecord");
  std::vector<std::string> local_new = {local("train-0.tfrecord"), dir_ + "/new/train-1.tfrecord",
                                        local("train-2.tfrecord")};
  proxy_.clear();
  EXPECT_EQ(elements(source("s3://data/set/", 0)),
            elements({{"kind", "tfrecord"}, {"uri", local_new}, {"raw", true}}));
  std::string seen;  // shown on failure: each request's method, target, range and answer
  for (const ProxiedRequest& r : proxy_.requests())
    seen += r.method + " " + r.target + " [" + r.header("Range") + "] " + r.answer + "\n";
  EXPECT_EQ(count_by_path(proxy_.requests(), "GET"),
            (std::map<std::string, int>{{"/data/set/train-1.tfrecord", 1}}))
      << seen;
  EXPECT_EQ(count_by_path(proxy_.requests(), "HEAD"), once);
}

// A server killed in the middle of a shard: the HTTP reader's retries resume it with a
// ranged GET once the server is back (docs/http.md, "Retries and resume"), or, when it
// stays down, fail after max_retries naming the object. The shard (12 MB: 48 records of
// 250 KB) is more than the socket buffers hold, and the read-ahead buffer is 4 KB, so the
// kill cuts a transfer in flight.
class S3Killed : public S3Read {
 protected:
  void SetUp() override {
    S3Read::SetUp();
    TfRecordWriter w(dir_ + "/big.tfrecord");
    for (int i = 0; i < 48; ++i) w.write(bytes_of(250'000, 9000 + i));
    w.close();
    server_.upload("data", dir_ + "/big.tfrecord", "big/shard.tfrecord");
  }
  // The shard's pipeline, with `retries` consecutive failed attempts allowed and a backoff
  // from `initial` doubling to `max` seconds.
  std::unique_ptr<Pipeline> pipeline(int retries, double initial, double max) const {
    json s = json::parse(spec(source("s3://data/big/shard.tfrecord")));
    s["source"]["http"] = {
        {"max_retries", retries}, {"backoff_initial_s", initial}, {"backoff_max_s", max}};
    return build(s.dump());
  }
  json source(const std::string& uri) const {
    return {{"kind", "tfrecord"}, {"uri", uri}, {"raw", true}, {"buffer_bytes", 4096}};
  }
  std::vector<std::string> local_records() const {
    return elements(source(dir_ + "/big.tfrecord"));
  }
};

std::vector<std::string> as_json(const std::vector<Example>& examples) {
  std::vector<std::string> out;
  for (const Example& e : examples) out.push_back(example_to_json(e, true).dump());
  return out;
}

// Counter `name` of the source node in the pipeline's stats JSON (0 when absent).
int64_t source_counter(Pipeline& p, const std::string& name) {
  for (const json& node : p.stats().to_json()) {
    if (node.contains("counters") && node["counters"].contains(name))
      return node["counters"][name].get<int64_t>();
  }
  return 0;
}

TEST_F(S3Killed, RestartedServerResumesEveryRecordExactlyOnce) {
  const auto want = local_records();
  ASSERT_EQ(want.size(), 48u);
  // At least 8 s of retries (backoff 0.1 s doubling to 0.5 s, jitter >= 0.5, 40 tries)
  // cover the 2 s outage and the server's start.
  auto p = pipeline(40, 0.1, 0.5);
  std::string error;
  auto got = read_through_outage(
      *p, 10, [&] { server_.stop(); }, [&] { server_.restart(); }, error);
  ASSERT_EQ(error, "");
  EXPECT_TRUE(as_json(got) == want) << got.size() << " records";
  EXPECT_GE(source_counter(*p, "http_resumed"), 1) << p->stats().to_json().dump();
}

TEST_F(S3Killed, ServerThatStaysDownFailsNamingTheObjectAfterItsRetries) {
  const auto want = local_records();
  auto p = pipeline(3, 0.01, 0.05);
  std::string error;
  const auto began = std::chrono::steady_clock::now();
  auto got = read_through_outage(
      *p, 10, [&] { server_.stop(); }, nullptr, error);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
  // Not a silent truncation: an error naming the object, the tries and why.
  EXPECT_CONTAINS(error, "(s3://data/big/shard.tfrecord)");
  EXPECT_CONTAINS(error, "failed after 4 tries");
  EXPECT_CONTAINS(error, "Couldn't connect to server");
  ASSERT_LT(got.size(), want.size());
  // What was read before the failure is the shard's beginning, each record once.
  auto read = as_json(got);
  EXPECT_TRUE(std::equal(read.begin(), read.end(), want.begin()));
}

// The error of reading `uri` (a text source), and the requests the proxy saw for it.
struct Failure {
  std::string what;
  size_t requests = 0;
};

class S3Errors : public S3Read {
 protected:
  Failure read_error(const std::string& uri) {
    const size_t before = proxy_.requests().size();
    Failure f;
    f.what = error_of([&] { run(spec({{"kind", "text"}, {"uri", uri}})); });
    f.requests = proxy_.requests().size() - before;
    return f;
  }
  void SetUp() override {
    S3Read::SetUp();
    proxy_.start(server_);
  }
};

TEST_F(S3Errors, WrongSecretUnknownKeyIdMissingBucketAndKeyAreNamed) {
  const std::string wrong = "not/the+secret0123456789of-the-server";
  env_.set("AWS_SECRET_ACCESS_KEY", wrong);
  Failure f = read_error(remote("lines.txt"));
  EXPECT_CONTAINS(f.what, "the secret access key does not match the key id");
  EXPECT_CONTAINS(f.what, "SignatureDoesNotMatch");
  EXPECT_CONTAINS(f.what, "(s3://data/set/lines.txt)");
  EXPECT_EQ(f.what.find(wrong), std::string::npos) << f.what;
  EXPECT_EQ(f.requests, 1u);  // not retried
  env_.set("AWS_SECRET_ACCESS_KEY", server_.secret_access_key());
  env_.set("AWS_ACCESS_KEY_ID", "AKIANOTKNOWNTOSERVER");
  f = read_error(remote("lines.txt"));
  EXPECT_CONTAINS(f.what,
                  "the access key id is not known to the server (HTTP 403 InvalidAccessKeyId");
  env_.set("AWS_ACCESS_KEY_ID", server_.access_key_id());
  f = read_error("s3://no-such-bucket/set/lines.txt");
  EXPECT_CONTAINS(f.what, "no such bucket (HTTP 404 NoSuchBucket");
  EXPECT_CONTAINS(f.what, "(s3://no-such-bucket/set/lines.txt)");
  EXPECT_EQ(f.requests, 1u);
  f = read_error(remote("missing.txt"));
  EXPECT_CONTAINS(f.what, "no such key (HTTP 404 NoSuchKey");
  EXPECT_CONTAINS(f.what, "(s3://data/set/missing.txt)");
  EXPECT_EQ(f.requests, 1u);
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) unsetenv(v);
  f = read_error(remote("lines.txt"));
  EXPECT_CONTAINS(f.what,
                  "no AWS credentials found: looked in AWS_ACCESS_KEY_ID/"
                  "AWS_SECRET_ACCESS_KEY (not set), " +
                      env_.home() + "/.aws/credentials [default] (no such file)");
  EXPECT_EQ(f.requests, 0u);
}

TEST_F(S3Errors, SlowDownThreeTimesThenReads) {
  const auto want = elements({{"kind", "text"}, {"uri", local("lines.txt")}});
  proxy_.fault({.kind = "slowdown", .path = "/data/set/lines.txt", .times = 3});
  StreamOptions o;
  o.s3.endpoint = proxy_.endpoint();
  o.backoff_initial_s = 0.01;
  o.stats = std::make_shared<NodeStats>("0:text");
  std::string got(100000, '\0');
  got.resize(open_stream(remote("lines.txt"), o)->read_fully(got.data(), got.size()));
  EXPECT_EQ(got, slurp(local("lines.txt")));
  EXPECT_EQ(o.stats->counters()["s3_retries_slowdown"], 3);
  EXPECT_EQ(o.stats->counters()["http_retries"], 3);
  std::vector<std::string> answers;
  for (const ProxiedRequest& r : proxy_.requests()) answers.push_back(r.answer);
  EXPECT_EQ(answers, (std::vector<std::string>{"slowdown", "slowdown", "slowdown", "forwarded"}));
  // The same through a pipeline, with 500 InternalError and 400 RequestTimeout.
  proxy_.fault({.kind = "internal", .path = "/data/set/lines.txt"});
  proxy_.fault({.kind = "timeout", .path = "/data/set/lines.txt"});
  EXPECT_EQ(elements({{"kind", "text"}, {"uri", remote("lines.txt")}}), want);
}

TEST_F(S3Errors, AccessDeniedAndWrongRegionAreNamedNotRetried) {
  proxy_.fault({.kind = "denied", .path = "/data/set/lines.txt", .times = -1});
  Failure f = read_error(remote("lines.txt"));
  EXPECT_CONTAINS(f.what, "access denied");
  EXPECT_CONTAINS(f.what, "HTTP 403 AccessDenied");
  EXPECT_EQ(f.requests, 1u);
  proxy_.clear();
  proxy_.fault({.kind = "redirect", .path = "/data/set/lines.txt", .times = -1});
  f = read_error(remote("lines.txt"));
  EXPECT_CONTAINS(f.what,
                  "the bucket is in region eu-west-1, not us-east-1: set \"s3\": "
                  "{\"region\": \"eu-west-1\"} or AWS_REGION");
  EXPECT_EQ(f.requests, 1u);
  proxy_.clear();
  proxy_.fault(
      {.kind = "malformed", .path = "/data/set/lines.txt", .times = -1, .region = "ap-south-1"});
  f = read_error(remote("lines.txt"));
  EXPECT_CONTAINS(f.what, "the bucket is in region ap-south-1, not us-east-1");
  EXPECT_EQ(f.requests, 1u);
}

TEST_F(S3Read, NoSecretInErrorsStatsOrState) {
  const std::string token = "IQoJb3JpZ2luX2VjEXAMPLEsessiontoken/+=";
  env_.set("AWS_SESSION_TOKEN", token);
  proxy_.start(server_);
  auto p =
      build(spec({{"kind", "tfrecord"}, {"uri", remote("train-{0..2}.tfrecord")}, {"raw", true}}));
  drain(*p, 25);
  const std::string state = p->save();
  const std::string stats = p->stats().to_json().dump();
  // The token was sent, signed; it and the secret appear in nothing dataecho writes.
  ASSERT_FALSE(proxy_.requests().empty());
  EXPECT_EQ(proxy_.requests().front().header("x-amz-security-token"), token);
  for (const std::string& secret : {token, server_.secret_access_key()}) {
    EXPECT_EQ(state.find(secret), std::string::npos);
    EXPECT_EQ(stats.find(secret), std::string::npos);
  }
  env_.set("AWS_SECRET_ACCESS_KEY", "wrong/" + server_.secret_access_key());
  const std::string e = error_of([&] {
    run(spec({{"kind", "text"}, {"uri", remote("lines.txt")}}));
  });
  EXPECT_CONTAINS(e, "SignatureDoesNotMatch");
  EXPECT_EQ(e.find(server_.secret_access_key()), std::string::npos) << e;
  EXPECT_EQ(e.find(token), std::string::npos) << e;
}

}  // namespace
}  // namespace dataecho::testing
