// The S3 test server is a real one (it refuses a wrong secret and an unknown key id,
// keeps its objects across a kill), and the fault proxy answers as scripted and otherwise
// relays unchanged: the ground the S3 tests stand on.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "s3_server.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string read_back(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One plain (unsigned) request with libcurl, as a client under test would see it.
struct Answer {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string headers, body;
};

Answer fetch(const std::string& url) {
  Answer a;
  CURL* curl = curl_easy_init();
  auto append = +[](char* p, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, size * n);
    return size * n;
  };
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a.headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
  a.code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.status);
  curl_easy_cleanup(curl);
  return a;
}

// A server with bucket "fixtures" holding tree/a.bin (300 KB of random bytes), tree/b.txt
// and tree/sub/c.txt, uploaded by boto3; `local` is the uploaded folder.
struct Served {
  S3Server server;
  std::string local = temp_dir() + "/tree";
  Served() {
    write_file(local + "/a.bin", random_bytes(300'000, 7));
    write_file(local + "/b.txt", "bee\n");
    write_file(local + "/sub/c.txt", "sea\n");
    server.start();
    server.create_bucket("fixtures");
    server.upload("fixtures", local, "tree/");
  }
  FixturesRun boto(const std::vector<std::string>& args, const std::string& endpoint = "") {
    return run_fixtures(endpoint.empty() ? server.endpoint() : endpoint, server.access_key_id(),
                        server.secret_access_key(), args);
  }
};

TEST(S3Server, RefusesAWrongSecretAndAnUnknownKeyIdAndServesTheRightPair) {
  Served s;
  const std::string out = temp_dir() + "/got";
  auto wrong_secret =
      run_fixtures(s.server.endpoint(), s.server.access_key_id(),
                   s.server.secret_access_key() + "x", {"get", "fixtures", "tree/a.bin", out});
  EXPECT_EQ(wrong_secret.status, 3) << wrong_secret.output;
  EXPECT_EQ(wrong_secret.output, "error SignatureDoesNotMatch 403\n");
  auto unknown_key = run_fixtures(s.server.endpoint(), "AKIANOTKNOWNTOSERVER",
                                  s.server.secret_access_key(), {"list", "fixtures"});
  EXPECT_EQ(unknown_key.status, 3) << unknown_key.output;
  EXPECT_EQ(unknown_key.output, "error InvalidAccessKeyId 403\n");
  // s3rver's own built-in key pair is revoked by start.js.
  auto builtin = run_fixtures(s.server.endpoint(), "S3RVER", "S3RVER", {"list", "fixtures"});
  EXPECT_EQ(builtin.output, "error InvalidAccessKeyId 403\n");

  auto listed = s.boto({"list", "fixtures"});
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_EQ(listed.output, "tree/a.bin\ntree/b.txt\ntree/sub/c.txt\n");
  auto got = s.boto({"get", "fixtures", "tree/a.bin", out});
  ASSERT_EQ(got.status, 0) << got.output;
  EXPECT_TRUE(read_back(out) == read_back(s.local + "/a.bin"));
  auto missing = s.boto({"get", "fixtures", "tree/none", out});
  EXPECT_EQ(missing.output, "error NoSuchKey 404\n");
}

TEST(S3Server, KilledThenRestartedOnItsPortAndFolderServesTheSameObjects) {
  Served s;
  S3FaultProxy proxy;
  proxy.start(s.server);
  const int port = s.server.port();
  s.server.stop();
  EXPECT_FALSE(s.server.running());
  Answer down = fetch(s.server.endpoint() + "/fixtures/tree/b.txt");
  EXPECT_EQ(down.code, CURLE_COULDNT_CONNECT);
  s.server.restart();
  EXPECT_EQ(s.server.port(), port);
  const std::string out = temp_dir() + "/got";
  // Through the proxy, which outlives the server: signed by boto3, relayed unchanged.
  auto got = s.boto({"get", "fixtures", "tree/a.bin", out}, proxy.endpoint());
  ASSERT_EQ(got.status, 0) << got.output;
  EXPECT_TRUE(read_back(out) == read_back(s.local + "/a.bin"));
}

// A listing of more keys than one page holds (S3 and the server: at most 1,000) is
// truncated and continued with the server's token, which it makes with DES: the fixture
// starts Node.js with OpenSSL 3's legacy provider, else the second page is a 500.
TEST(S3Server, AListingOfMoreThanAThousandKeysPages) {
  S3Server server;
  server.start();
  server.create_bucket("many");
  const std::string local = temp_dir() + "/many";
  std::vector<std::string> expected;
  for (int i = 0; i < 1005; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "k%04d", i);
    write_file(local + "/" + name, "");
    expected.push_back(std::string("keys/") + name);
  }
  server.upload("many", local, "keys/");
  auto listed = run_fixtures(server.endpoint(), server.access_key_id(), server.secret_access_key(),
                             {"list", "many", "keys/"});
  ASSERT_EQ(listed.status, 0) << listed.output.substr(0, 2000);
  std::vector<std::string> keys;
  std::istringstream lines(listed.output);
  for (std::string line; std::getline(lines, line);) keys.push_back(line);
  EXPECT_EQ(keys, expected);
}

TEST(S3Server, WithoutNodeOrItsPackagesSaysToRunBootstrap) {
  S3Server server;
  S3ServerOptions no_packages;
  no_packages.server_dir = temp_dir();
  std::string message;
  try {
    server.start(no_packages);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  EXPECT_CONTAINS(message, "no @20minutes/s3rver: run scripts/bootstrap.sh");
  const std::string path = std::getenv("PATH");
  setenv("PATH", temp_dir().c_str(), 1);
  message.clear();
  try {
    server.start();
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  setenv("PATH", path.c_str(), 1);
  EXPECT_CONTAINS(message, "needs node (Node.js), which is not on PATH: run scripts/bootstrap.sh");
}

// Each S3 error of the script, in order, then the object itself; then a cut response.
TEST(S3FaultProxy, AnswersEachScriptedFaultThenRelays) {
  Served s;
  S3FaultProxy proxy;
  proxy.start(s.server);
  const std::string key = "/fixtures/tree/a.bin";
  struct Case {
    const char* kind;
    long status;
    const char* code;
  };
  const std::vector<Case> cases = {{"slowdown", 503, "SlowDown"},
                                   {"slowdown", 503, "SlowDown"},
                                   {"unavailable", 503, "ServiceUnavailable"},
                                   {"internal", 500, "InternalError"},
                                   {"timeout", 400, "RequestTimeout"},
                                   {"denied", 403, "AccessDenied"},
                                   {"redirect", 301, "PermanentRedirect"},
                                   {"malformed", 400, "AuthorizationHeaderMalformed"}};
  proxy.fault({.kind = "slowdown", .path = key, .times = 2});
  for (size_t i = 2; i < cases.size(); ++i) {
    proxy.fault({.kind = cases[i].kind, .path = key, .region = "eu-west-2"});
  }
  proxy.fault({.kind = "denied", .path = key, .method = "HEAD"});  // no GET matches it
  for (const auto& c : cases) {
    Answer a = fetch(proxy.endpoint() + key);
    EXPECT_EQ(a.status, c.status) << c.kind;
    EXPECT_CONTAINS(a.body, std::string("<Code>") + c.code + "</Code><Message>");
    EXPECT_CONTAINS(a.headers, "Content-Type: application/xml");
  }
  Answer ok = fetch(proxy.endpoint() + key);
  EXPECT_EQ(ok.status, 200);
  EXPECT_TRUE(ok.body == read_back(s.local + "/a.bin"));

  proxy.fault({.kind = "cut", .path = key, .bytes = 1000});
  Answer cut = fetch(proxy.endpoint() + key);
  EXPECT_EQ(cut.code, CURLE_PARTIAL_FILE);
  EXPECT_EQ(cut.body, read_back(s.local + "/a.bin").substr(0, 1000));
  EXPECT_CONTAINS(cut.headers, "Content-Length: 300000");

  auto log = proxy.requests();
  ASSERT_EQ(log.size(), cases.size() + 2);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(log[i].answer, cases[i].kind);
  EXPECT_EQ(log[cases.size()].answer, "forwarded");
  EXPECT_EQ(log.back().answer, "cut");
  EXPECT_EQ(log.back().method, "GET");
  EXPECT_EQ(log.back().target, key);
  EXPECT_EQ(log.back().header("host"), "127.0.0.1:" + std::to_string(proxy.port()));
}

TEST(S3FaultProxy, RegionAnswersNameTheRegion) {
  Served s;
  S3FaultProxy proxy;
  proxy.start(s.server);
  proxy.fault({.kind = "redirect", .path = "/fixtures*", .region = "eu-west-2"});
  proxy.fault({.kind = "malformed", .path = "/fixtures*", .region = "ap-south-1"});
  Answer moved = fetch(proxy.endpoint() + "/fixtures?list-type=2");
  EXPECT_EQ(moved.status, 301);
  EXPECT_CONTAINS(moved.headers, "x-amz-bucket-region: eu-west-2\r\n");
  EXPECT_CONTAINS(moved.body, "<Endpoint>fixtures.s3.eu-west-2.amazonaws.com</Endpoint>");
  Answer malformed = fetch(proxy.endpoint() + "/fixtures/tree/b.txt");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_CONTAINS(malformed.body, "<Region>ap-south-1</Region>");
  EXPECT_CONTAINS(malformed.body, "expecting 'ap-south-1'");
}

// Signed requests pass the proxy unchanged (host and body): the server verifies them.
TEST(S3FaultProxy, RelaysSignedRequestsAndFailsThemAsScripted) {
  Served s;
  S3FaultProxy proxy;
  proxy.start(s.server);
  const std::string file = temp_dir() + "/up.bin";
  write_file(file, random_bytes(2'000'000, 9));
  auto put = s.boto({"put", "fixtures", file, "up/up.bin"}, proxy.endpoint());
  ASSERT_EQ(put.status, 0) << put.output;
  proxy.fault({.kind = "slowdown", .path = "/fixtures/up/up.bin", .times = -1, .method = "GET"});
  const std::string out = temp_dir() + "/got";
  EXPECT_EQ(s.boto({"get", "fixtures", "up/up.bin", out}, proxy.endpoint()).output,
            "error SlowDown 503\n");
  EXPECT_EQ(s.boto({"get", "fixtures", "up/up.bin", out}, proxy.endpoint()).output,
            "error SlowDown 503\n");
  proxy.clear();
  EXPECT_TRUE(proxy.requests().empty());
  auto got = s.boto({"get", "fixtures", "up/up.bin", out}, proxy.endpoint());
  ASSERT_EQ(got.status, 0) << got.output;
  EXPECT_TRUE(read_back(out) == read_back(file));
  auto log = proxy.requests();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].answer, "forwarded");
  EXPECT_EQ(log[0]
                .header("authorization")
                .rfind("AWS4-HMAC-SHA256 Credential=" + s.server.access_key_id() + "/", 0),
            0u)
      << log[0].header("authorization");

  std::string message;
  try {
    proxy.fault({.kind = "teapot"});
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  EXPECT_CONTAINS(message, "unknown fault 'teapot'");
}

}  // namespace
}  // namespace dataecho::testing
