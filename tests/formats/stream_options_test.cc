// The "http" and "s3" objects of file sources: stream options from the spec, validated
// with JSON paths, and reaching the stream (the retry budget is the one the spec asked for).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace dataecho::testing {
namespace {

void expect_contains(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

// A loopback port bound but not listening, held for the test: connecting is refused at
// once, every time (no timing involved).
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + path;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::string tfrecord_spec(const std::string& uri, const nlohmann::json& http) {
  nlohmann::json s = {{"source", {{"kind", "tfrecord"}, {"uri", uri}, {"raw", true}}}};
  if (!http.is_null()) s["source"]["http"] = http;
  return s.dump();
}

TEST(StreamOptionsSpec, AllFieldsAcceptedOnEveryFileSource) {
  nlohmann::json http = {{"connect_timeout_s", 2.5},
                         {"low_speed_time_s", 10},
                         {"max_retries", 3},
                         {"backoff_initial_s", 0.05},
                         {"backoff_max_s", 1}};
  EXPECT_NO_THROW(build(tfrecord_spec("http://127.0.0.1:1/a.tfrecord", http)));
  nlohmann::json tar = {
      {"source", {{"kind", "tar"}, {"uri", "http://127.0.0.1:1/a.tar"}, {"http", http}}}};
  EXPECT_NO_THROW(build(tar.dump()));
  // An empty object keeps every default.
  EXPECT_NO_THROW(build(tfrecord_spec("http://127.0.0.1:1/a.tfrecord", nlohmann::json::object())));
}

TEST(StreamOptionsSpec, WrongValuesNameTheirJsonPath) {
  auto err = [](const nlohmann::json& http) {
    return error_of([&] { build(tfrecord_spec("http://127.0.0.1:1/a.tfrecord", http)); });
  };
  expect_contains(err({{"max_retries", -1}}), {"$.source.http.max_retries", "integer", "-1"});
  expect_contains(err({{"max_retries", 2.5}}), {"$.source.http.max_retries", "integer"});
  expect_contains(err({{"connect_timeout_s", 0}}), {"$.source.http.connect_timeout_s"});
  expect_contains(err({{"low_speed_time_s", "slow"}}),
                  {"$.source.http.low_speed_time_s", "number", "string"});
  expect_contains(err({{"backoff_initial_s", -0.1}}), {"$.source.http.backoff_initial_s"});
  expect_contains(err({{"backoff_initial_s", 2}, {"backoff_max_s", 1}}),
                  {"$.source.http.backoff_max_s", ">= backoff_initial_s"});
  expect_contains(err({{"retries", 3}}), {"$.source.http.retries", "unknown field"});
  expect_contains(err(5), {"$.source.http", "object"});
}

TEST(StreamOptionsSpec, RetryBudgetReachesTheStream) {
  RefusingPort port;
  for (int retries : {0, 2}) {
    nlohmann::json http = {
        {"max_retries", retries}, {"backoff_initial_s", 0.001}, {"backoff_max_s", 0.002}};
    std::string msg = error_of([&] { run(tfrecord_spec(port.url("a.tfrecord"), http)); });
    expect_contains(msg,
                    {"after " + std::to_string(retries + 1) + " tries", port.url("a.tfrecord")});
  }
  // idx opens its files when the spec is built: the options apply there too.
  nlohmann::json idx = {{"source",
                         {{"kind", "idx"},
                          {"images", port.url("images-idx3-ubyte")},
                          {"http", {{"max_retries", 1}, {"backoff_initial_s", 0.001}}}}}};
  expect_contains(error_of([&] { build(idx.dump()); }), {"after 2 tries"});
}

// The "s3" object: its options are checked with their JSON paths, and a secret written in
// a spec is refused (credentials come from the environment or ~/.aws only).
TEST(StreamOptionsSpec, S3OptionsAreCheckedAndSecretsRefused) {
  auto err = [](const nlohmann::json& s3) {
    nlohmann::json s = {{"source", {{"kind", "text"}, {"uri", "s3://bkt/a.txt"}, {"s3", s3}}}};
    return error_of([&] { build(s.dump()); });
  };
  for (const char* secret : {"access_key_id", "secret_access_key", "session_token"})
    expect_contains(err({{secret, "AKIAEXAMPLE"}}), {std::string("$.source.s3.") + secret,
                                                     "a secret may not be written in a spec"});
  expect_contains(err({{"addressing", "vhost"}}), {"$.source.s3.addressing", "\"virtual\""});
  expect_contains(err({{"regoin", "eu-west-1"}}), {"$.source.s3.regoin", "unknown field"});
  expect_contains(err({{"anonymous", "yes"}}), {"$.source.s3.anonymous"});
}

}  // namespace
}  // namespace dataecho::testing
