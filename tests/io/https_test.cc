// HTTPS against a real nginx with TLS on loopback: a CA and server
// certificates made with openssl in the test, verification on by default, the CA given by
// the spec or by SSL_CERT_FILE / CURL_CA_BUNDLE, failures that say why and are not
// retried, "insecure" as an explicit, counted choice, and an Authorization header taken
// from the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/core/example_json.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/io/byte_stream.h"
#include "dataecho/spec/build.h"
#include "nginx_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::NginxServer;
using testing::NginxServerOptions;

void run(const std::string& cmd) {
  ASSERT_EQ(std::system((cmd + " >/dev/null 2>&1").c_str()), 0) << cmd;
}

// A test CA, a server certificate for 127.0.0.1 and one for another name, in `dir`.
void make_certificates(const std::string& dir) {
  const std::string d = "'" + dir + "'";
  run("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + d + "/ca.key -out " + d +
      "/ca.pem -days 2 -subj '/CN=dataecho test CA'");
  for (const auto& [name, san] :
       {std::pair<std::string, std::string>{"server", "IP:127.0.0.1,DNS:localhost"},
        {"wrong", "DNS:wrong.example"}}) {
    run("openssl req -newkey rsa:2048 -nodes -keyout " + d + "/" + name + ".key -out " + d + "/" +
        name + ".csr -subj '/CN=" + name + "'");
    std::ofstream(dir + "/" + name + ".ext") << "subjectAltName=" << san << "\n";
    run("openssl x509 -req -in " + d + "/" + name + ".csr -CA " + d + "/ca.pem -CAkey " + d +
        "/ca.key -CAcreateserial -days 2 -out " + d + "/" + name + ".pem -extfile " + d + "/" +
        name + ".ext");
  }
  // One that expired in 2020 (`openssl x509` cannot set past dates; `openssl ca` can).
  std::ofstream(dir + "/ca.cnf") << "[ca]\ndefault_ca = test\n[test]\ndatabase = " << dir
                                 << "/index.txt\nnew_certs_dir = " << dir << "\nserial = " << dir
                                 << "/serial\ndefault_md = sha256\npolicy = any\n"
                                    "copy_extensions = copy\n[any]\ncommonName = supplied\n";
  std::ofstream(dir + "/index.txt");
  std::ofstream(dir + "/serial") << "1000\n";
  run("openssl req -newkey rsa:2048 -nodes -keyout " + d + "/expired.key -out " + d +
      "/expired.csr -subj '/CN=expired' -addext subjectAltName=IP:127.0.0.1");
  run("openssl ca -batch -notext -config " + d + "/ca.cnf -cert " + d + "/ca.pem -keyfile " + d +
      "/ca.key -in " + d + "/expired.csr -out " + d +
      "/expired.pem -startdate 20200101000000Z -enddate 20200102000000Z");
}

std::string read_all(ByteStream& s) {
  std::string out, buf(64 << 10, '\0');
  while (size_t n = s.read(buf.data(), buf.size())) out.append(buf.data(), n);
  return out;
}

class HttpsTest : public ::testing::Test {
 protected:
  // The certificates, made once for the suite (RSA key generation takes a while).
  static void SetUpTestSuite() {
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) return;  // SetUp fails
    suite_certs_ = dataecho::testing::temp_dir() + "/certs";
    std::filesystem::create_directories(suite_certs_);
    make_certificates(suite_certs_);
  }
  void SetUp() override {
    if (suite_certs_.empty())
      GTEST_FAIL() << "openssl is missing (scripts/bootstrap.sh installs it)";
    dir_ = dataecho::testing::temp_dir();
    certs_ = suite_certs_;
    root_ = dir_ + "/www";
    std::filesystem::create_directories(root_);
    std::mt19937_64 rng(7);
    data_.resize(3 << 20);
    for (auto& c : data_) c = static_cast<char>(rng());
    std::ofstream(root_ + "/shard.bin", std::ios::binary).write(data_.data(), data_.size());
    unsetenv("SSL_CERT_FILE");
    unsetenv("CURL_CA_BUNDLE");
  }
  void TearDown() override {
    unsetenv("SSL_CERT_FILE");
    unsetenv("CURL_CA_BUNDLE");
  }
  void serve(const std::string& cert, const std::string& authorization = "") {
    NginxServerOptions o;
    o.ssl_certificate = certs_ + "/" + cert + ".pem";
    o.ssl_certificate_key = certs_ + "/" + cert + ".key";
    o.required_authorization = authorization;
    server_.start(root_, o);
  }
  // The Error of opening and reading `url` (default: the shard on server_) with `o`, or
  // "" when it reads.
  std::string failure(const StreamOptions& o, const std::string& url = "") {
    try {
      auto s = open_stream(url.empty() ? server_.url("shard.bin") : url, o);
      read_all(*s);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  static inline std::string suite_certs_;
  std::string dir_, certs_, root_, data_;
  NginxServer server_;
};

TEST_F(HttpsTest, WithItsCaTheBytesAreTheLocalBytes) {
  serve("server");
  StreamOptions o;
  o.ca_file = certs_ + "/ca.pem";
  auto s = open_stream(server_.url("shard.bin"), o);
  EXPECT_EQ(read_all(*s), data_);
}

TEST_F(HttpsTest, WithoutItsCaItFailsAtOnceSayingUntrusted) {
  serve("server");
  StreamOptions o;
  o.stats = std::make_shared<NodeStats>("0:tfrecord");
  const std::string err = failure(o);
  EXPECT_NE(err.find("untrusted"), std::string::npos) << err;
  EXPECT_NE(err.find("not retried"), std::string::npos) << err;
  EXPECT_EQ(o.stats->counters()["http_requests"], 1);  // no retries
  EXPECT_EQ(o.stats->counters()["http_retries"], 0);
}

TEST_F(HttpsTest, SslCertFileAndCurlCaBundleGiveTheCa) {
  serve("server");
  for (const char* var : {"SSL_CERT_FILE", "CURL_CA_BUNDLE"}) {
    setenv(var, (certs_ + "/ca.pem").c_str(), 1);
    EXPECT_EQ(failure(StreamOptions{}), "") << var;
    unsetenv(var);
  }
}

TEST_F(HttpsTest, ACertificateForAnotherNameFailsSayingMismatch) {
  serve("wrong");
  StreamOptions o;
  o.ca_file = certs_ + "/ca.pem";
  const std::string err = failure(o);
  EXPECT_NE(err.find("mismatch"), std::string::npos) << err;
}

TEST_F(HttpsTest, AnExpiredCertificateFailsSayingExpired) {
  serve("expired");
  StreamOptions o;
  o.ca_file = certs_ + "/ca.pem";
  const std::string err = failure(o);
  EXPECT_NE(err.find("expired"), std::string::npos) << err;
  EXPECT_NE(err.find("not retried"), std::string::npos) << err;
}

TEST_F(HttpsTest, InsecureIsExplicitAndCounted) {
  serve("server");
  StreamOptions o;
  o.insecure = true;
  o.stats = std::make_shared<NodeStats>("0:tfrecord");
  EXPECT_EQ(failure(o), "");
  EXPECT_EQ(o.stats->counters()["http_tls_unverified"], 1);
  // Through a spec it also warns, on standard error.
  ::testing::internal::CaptureStderr();
  build_pipeline({{"source",
                   {{"kind", "tfrecord"},
                    {"uri", server_.url("shard.bin")},
                    {"raw", true},
                    {"http", {{"insecure", true}}}}}});
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("NOT verified"), std::string::npos) << warned;
}

TEST_F(HttpsTest, AnAuthorizationHeaderFromTheEnvironment) {
  serve("server", "Bearer t0k3n-value");
  const std::string ca = certs_ + "/ca.pem";
  StreamOptions o;
  o.ca_file = ca;
  const std::string denied = failure(o);
  EXPECT_NE(denied.find("HTTP 401"), std::string::npos) << denied;

  // Through a spec: the token comes from a variable, never from the spec file.
  std::ofstream(root_ + "/a.tfrecord", std::ios::binary);  // an empty shard: no records
  auto spec = [&](const char* var) {
    return nlohmann::json{
        {"source",
         {{"kind", "tfrecord"},
          {"uri", server_.url("a.tfrecord")},
          {"http", {{"ca_file", ca}, {"headers", {{"Authorization", {{"env", var}}}}}}}}}};
  };
  setenv("DATAECHO_TEST_TOKEN", "Bearer t0k3n-value", 1);
  auto p = build_pipeline(spec("DATAECHO_TEST_TOKEN"));
  EXPECT_FALSE(p->next().has_value());
  unsetenv("DATAECHO_TEST_TOKEN");
  try {
    build_pipeline(spec("DATAECHO_TEST_TOKEN"));
    ADD_FAILURE() << "expected a spec error for the missing variable";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("$.source.http.headers.Authorization.env"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("DATAECHO_TEST_TOKEN is not set"), std::string::npos);
  }
}

TEST_F(HttpsTest, ARedirectFromHttpsToPlainHttpIsRefused) {
  NginxServer plain;
  plain.start(root_, {});
  NginxServerOptions o;
  o.ssl_certificate = certs_ + "/server.pem";
  o.ssl_certificate_key = certs_ + "/server.key";
  o.redirect_to = plain.url("").substr(0, plain.url("").size() - 1);  // no trailing '/'
  server_.start(root_, o);
  StreamOptions so;
  so.ca_file = certs_ + "/ca.pem";
  const std::string err = failure(so, server_.url("moved/shard.bin"));
  EXPECT_NE(err.find("redirect from https"), std::string::npos) << err;
}

TEST_F(HttpsTest, TheAuthorizationHeaderDoesNotFollowARedirectToAnotherPort) {
  NginxServerOptions guarded;
  guarded.required_authorization = "Bearer t0k3n";
  NginxServer other;
  other.start(root_, guarded);
  StreamOptions so;
  so.headers = {"Authorization: Bearer t0k3n"};
  so.plain_http_credentials = true;                    // both servers are plain http here
  EXPECT_EQ(failure(so, other.url("shard.bin")), "");  // the header opens it directly
  NginxServerOptions o;
  o.redirect_to = other.url("").substr(0, other.url("").size() - 1);
  NginxServer first;
  first.start(root_, o);
  const std::string err = failure(so, first.url("moved/shard.bin"));
  EXPECT_NE(err.find("HTTP 401"), std::string::npos) << err;  // the header did not follow
}

TEST_F(HttpsTest, RedirectsAreCapped) {
  NginxServerOptions o;
  o.port = dataecho::testing::free_loopback_port();
  o.redirect_to = "http://127.0.0.1:" + std::to_string(o.port) + "/moved";  // a loop
  NginxServer loop;
  loop.start(root_, o);
  StreamOptions so;
  so.stats = std::make_shared<NodeStats>("0:tfrecord");
  const std::string err = failure(so, loop.url("moved/shard.bin"));
  EXPECT_NE(err.find("redirect"), std::string::npos) << err;
  EXPECT_EQ(so.stats->counters()["http_requests"], 1);  // not retried
}

TEST_F(HttpsTest, CredentialsOverPlainHttpAreRefusedUnlessTheSpecSaysSo) {
  NginxServerOptions guarded;
  guarded.required_authorization = "Bearer t0k3n";
  NginxServer plain;
  plain.start(root_, guarded);
  StreamOptions so;
  so.headers = {"authorization: Bearer t0k3n"};
  std::string err = failure(so, plain.url("shard.bin"));
  EXPECT_NE(err.find("refusing to send credentials"), std::string::npos) << err;
  EXPECT_EQ(err.find("t0k3n"), std::string::npos) << err;
  // user:password in the URL too (and it is not printed).
  std::string url = plain.url("shard.bin");
  url.insert(url.find("//") + 2, "reader:pa55word@");
  err = failure(StreamOptions{}, url);
  EXPECT_NE(err.find("refusing to send credentials"), std::string::npos) << err;
  EXPECT_EQ(err.find("pa55word"), std::string::npos) << err;
  // Said explicitly, it reads.
  so.plain_http_credentials = true;
  EXPECT_EQ(failure(so, plain.url("shard.bin")), "");
}

TEST_F(HttpsTest, A403OnASignedUrlIsNotRetriedAndSaysTheSignatureMayHaveExpired) {
  NginxServerOptions o;
  o.ssl_certificate = certs_ + "/server.pem";
  o.ssl_certificate_key = certs_ + "/server.key";
  o.deny = true;
  server_.start(root_, o);
  StreamOptions so;
  so.ca_file = certs_ + "/ca.pem";
  so.stats = std::make_shared<NodeStats>("0:tfrecord");
  const std::string err =
      failure(so, server_.url("denied/shard.bin?X-Amz-Expires=60&X-Amz-Signature=5ig"));
  EXPECT_NE(err.find("HTTP 403"), std::string::npos) << err;
  EXPECT_NE(err.find("may have expired"), std::string::npos) << err;
  EXPECT_EQ(err.find("5ig"), std::string::npos) << err;
  EXPECT_EQ(so.stats->counters()["http_requests"], 1);
}

TEST_F(HttpsTest, AForcedErrorPrintsTheUrlRedactedEvenInBase64) {
  serve("server");
  StreamOptions so;
  so.ca_file = certs_ + "/ca.pem";
  std::string url = server_.url("missing.bin?X-Amz-Signature=z1gz4g");
  url.insert(url.find("//") + 2, "reader:pa55@");
  const std::string err = failure(so, url);
  EXPECT_NE(err.find("HTTP 404"), std::string::npos) << err;
  for (const char* secret : {"pa55", "reader:", "cmVhZGVyOnBhNTU=", "z1gz4g"})
    EXPECT_EQ(err.find(secret), std::string::npos) << secret << " in " << err;
  EXPECT_NE(err.find("https://***@127.0.0.1:"), std::string::npos) << err;
}

// user:password in an https URL is basic auth (and never printed: see above).
TEST_F(HttpsTest, UserinfoInAnHttpsUrlIsBasicAuth) {
  serve("server", "Basic cmVhZGVyOnBhNTU=");  // base64("reader:pa55")
  StreamOptions so;
  so.ca_file = certs_ + "/ca.pem";
  EXPECT_NE(failure(so).find("HTTP 401"), std::string::npos);  // without it
  std::string url = server_.url("shard.bin");
  url.insert(url.find("//") + 2, "reader:pa55@");
  auto s = open_stream(url, so);
  EXPECT_EQ(read_all(*s), data_);
}

// A token from the environment is sent (nginx answers 401 without it) and appears in no
// output: the elements as `dataecho pipe` prints them, standard output and error, the
// stats JSON and the saved state.
TEST_F(HttpsTest, ATokenFromTheEnvironmentAppearsInNoOutput) {
  const std::string token = "Bearer s3cr3t-t0ken-4242";
  serve("server", token);
  {
    TfRecordWriter w(root_ + "/t.tfrecord");
    for (int i = 0; i < 20; ++i) w.write(std::string(300, static_cast<char>('a' + i)));
    w.close();
  }
  setenv("DATAECHO_TEST_TOKEN", token.c_str(), 1);
  const nlohmann::json spec = {
      {"source",
       {{"kind", "tfrecord"},
        {"uri", server_.url("t.tfrecord")},
        {"raw", true},
        {"http",
         {{"ca_file", certs_ + "/ca.pem"},
          {"headers", {{"Authorization", {{"env", "DATAECHO_TEST_TOKEN"}}}}}}}}},
      {"stages", nlohmann::json::array({{{"op", "batch"}, {"size", 4}}})}};
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::string outputs, error;
  int n = 0;
  try {
    auto p = build_pipeline(spec);
    while (auto e = p->next()) {
      outputs += example_to_json(*e, true).dump() + "\n";
      if (++n == 2) outputs += p->save();
    }
    outputs += p->stats().to_json().dump();
    outputs += p->save();
  } catch (const std::exception& e) {
    error = e.what();
  }
  outputs += ::testing::internal::GetCapturedStdout();
  outputs += ::testing::internal::GetCapturedStderr();
  unsetenv("DATAECHO_TEST_TOKEN");
  ASSERT_EQ(error, "");
  EXPECT_EQ(n, 5);  // the token opened the shard: 20 records in batches of 4
  EXPECT_EQ((outputs + error).find("s3cr3t-t0ken"), std::string::npos);
}

// The restart test of tests/io/http_dataset_test.cc over TLS: nginx stops mid-epoch and
// comes back; every record arrives exactly once, in the local order.
TEST_F(HttpsTest, AnEpochSurvivesNginxStoppedAndRestarted) {
  std::mt19937_64 rng(42);
  std::vector<std::string> local, remote;
  NginxServerOptions o;
  o.ssl_certificate = certs_ + "/server.pem";
  o.ssl_certificate_key = certs_ + "/server.key";
  o.limit_rate = "400k";  // about 2 s per shard with three at a time
  server_.start(root_, o);
  for (int shard = 0; shard < 4; ++shard) {
    const std::string name = "train-" + std::to_string(shard) + ".tfrecord";
    TfRecordWriter w(root_ + "/" + name);
    for (int i = 0; i < 30; ++i) {
      std::string rec(rng() % 40000, '\0');
      for (auto& c : rec) c = static_cast<char>(rng());
      w.write(rec);
    }
    w.close();
    local.push_back(root_ + "/" + name);
    remote.push_back(server_.url(name));
  }
  auto spec = [&](const std::vector<std::string>& uris) {
    return nlohmann::json{{"seed", 3},
                          {"source",
                           {{"kind", "tfrecord"},
                            {"uri", uris},
                            {"raw", true},
                            {"http", {{"ca_file", certs_ + "/ca.pem"}}}}},
                          {"stages", nlohmann::json::array({{{"op", "interleave"}, {"cycle", 3}}})}}
        .dump();
  };
  const auto want = testing::run(spec(local));
  ASSERT_EQ(want.size(), 120u);
  auto pipeline = testing::build(spec(remote));
  // Read a little, stop nginx, read on while it is down, restart it.
  std::string error;
  std::vector<Example> got = testing::read_through_restart(*pipeline, server_, 10, error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].id(), want[i].id()) << i;
    EXPECT_TRUE(got[i].get("record").bytes() == want[i].get("record").bytes()) << i;
  }
}

}  // namespace
}  // namespace dataecho
