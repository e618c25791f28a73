// HTTP byte streams against a real nginx (tests/io/nginx_server.h) and, for the faults
// nginx cannot be told to make (503 then 200, a body cut short, Range ignored), a small
// scripted HTTP/1.1 server on loopback in this file.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "dataecho/core/error.h"
#include "dataecho/io/http_stream.h"
#include "nginx_server.h"
#include "recording_server.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::NginxServer;
using testing::NginxServerOptions;
using testing::object_answer;
using testing::RecordedRequest;
using testing::RecordingServer;
using testing::ScriptedAnswer;

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Reads the stream to its end in reads of `chunk` bytes.
std::string read_all(ByteStream& s, size_t chunk = 64 << 10) {
  std::string out;
  std::string buf(chunk, '\0');
  // Bounded: a stream that never ends would fail the size check below anyway.
  for (int i = 0; i < (1 << 26); ++i) {
    size_t n = s.read(buf.data(), buf.size());
    if (n == 0) break;
    out.append(buf.data(), n);
  }
  return out;
}

StreamOptions fast_retry_options(std::shared_ptr<NodeStats> stats = nullptr) {
  StreamOptions o;
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  o.stats = std::move(stats);
  return o;
}

// ---- a scripted HTTP/1.1 server -------------------------------------------------------

// What the server does with its i-th request (0-based).
struct Reply {
  int status = 200;             // 200 (honouring Range with 206 when asked), or an error
  bool honor_range = true;      // false: answer 200 with the whole body to a ranged request
  size_t cut_after = SIZE_MAX;  // close the connection after this many body bytes
};

// Serves one body at any path (a RecordingServer: one connection at a time,
// `Connection: close` on every reply). Records the Range of every request.
class ScriptedServer {
 public:
  ScriptedServer(std::string body, std::function<Reply(int)> script)
      : body_(std::move(body)),
        script_(std::move(script)),
        server_([this](int i, const RecordedRequest& r) { return answer(script_(i), r); }) {}
  std::string url() const { return server_.endpoint() + "/data.bin"; }
  // The Range of each request ("100-"), "" for none.
  std::vector<std::string> ranges() {
    std::vector<std::string> out;
    for (const RecordedRequest& r : server_.requests()) {
      const std::string range = r.header("Range");
      out.push_back(range.rfind("bytes=", 0) == 0 ? range.substr(6) : "");
    }
    return out;
  }

 private:
  ScriptedAnswer answer(const Reply& reply, const RecordedRequest& r) const {
    ScriptedAnswer a;
    a.cut_after = reply.cut_after;
    if (reply.status != 200) {
      a.status = reply.status;
      a.body = "error\n";
    } else if (!r.header("Range").empty() && reply.honor_range) {
      a = object_answer(r, body_);
      a.cut_after = reply.cut_after;
    } else {
      a.body = body_;
    }
    return a;
  }

  std::string body_;
  std::function<Reply(int)> script_;
  RecordingServer server_;
};

// ---- against nginx --------------------------------------------------------------------

class HttpStreamNginxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::temp_dir();
    for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{65543}, size_t{3 << 20}}) {
      std::string name = "file-" + std::to_string(size) + ".bin";
      files_[name] = random_bytes(size, size + 1);
      write_file(root_ + "/" + name, files_[name]);
    }
  }
  std::string root_;
  std::map<std::string, std::string> files_;
  NginxServer nginx_;
};

TEST_F(HttpStreamNginxTest, BytesEqualLocalFilesForEverySize) {
  nginx_.start(root_);
  for (const auto& [name, bytes] : files_) {
    for (size_t chunk : {size_t{1} << 20, size_t{4093}}) {
      auto s = open_http_stream(nginx_.url(name), {});
      EXPECT_EQ(s->size(), static_cast<int64_t>(bytes.size())) << name;
      std::string got = read_all(*s, chunk);
      EXPECT_EQ(got.size(), bytes.size()) << name;
      EXPECT_TRUE(got == bytes) << name << " differs";
      EXPECT_EQ(s->position(), bytes.size());
      EXPECT_EQ(s->read(nullptr, 0), 0u);
    }
  }
}

TEST_F(HttpStreamNginxTest, SmallReadsOfABigFile) {
  nginx_.start(root_);
  StreamOptions o;
  o.buffer_bytes = 64 << 10;  // the ring fills and pauses the transfer many times
  auto s = open_http_stream(nginx_.url("file-3145728.bin"), o);
  std::string got = read_all(*s, 977);
  EXPECT_TRUE(got == files_["file-3145728.bin"]);
}

TEST_F(HttpStreamNginxTest, ConnectionsAreReusedAcrossStreams) {
  nginx_.start(root_);
  auto stats = std::make_shared<NodeStats>("http");
  StreamOptions o;
  o.stats = stats;
  for (int i = 0; i < 10; ++i) {
    auto s = open_http_stream(nginx_.url("file-65543.bin"), o);
    EXPECT_TRUE(read_all(*s) == files_["file-65543.bin"]);
  }
  auto c = stats->counters();
  EXPECT_EQ(c["http_requests"], 10);
  EXPECT_EQ(c["http_connections"], 1) << "keep-alive: one connection for ten streams";
  EXPECT_EQ(c["http_bytes"], 10 * 65543);
  EXPECT_EQ(c["http_retries"], 0);
}

TEST_F(HttpStreamNginxTest, ReadAheadIsBounded) {
  nginx_.start(root_);
  auto stats = std::make_shared<NodeStats>("http");
  StreamOptions o;
  o.buffer_bytes = 256 << 10;
  o.stats = stats;
  auto s = open_http_stream(nginx_.url("file-3145728.bin"), o);
  char byte;
  ASSERT_EQ(s->read(&byte, 1), 1u);
  // Give the transfer thread every chance to run ahead; it must stop at the bound.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(stats->counters()["http_bytes"], 1 + (256 << 10) + (64 << 10));
  std::string rest = read_all(*s);
  EXPECT_TRUE(std::string(1, byte) + rest == files_["file-3145728.bin"]);
}

TEST_F(HttpStreamNginxTest, SeekStartsARangedRequest) {
  nginx_.start(root_);
  const std::string& bytes = files_["file-3145728.bin"];
  auto stats = std::make_shared<NodeStats>("http");
  StreamOptions o;
  o.stats = stats;
  auto s = open_http_stream(nginx_.url("file-3145728.bin"), o);
  char buf[100];
  ASSERT_EQ(s->read_fully(buf, 100), 100u);
  s->seek(2000000);
  EXPECT_EQ(s->position(), 2000000u);
  std::string rest = read_all(*s);
  EXPECT_TRUE(rest == bytes.substr(2000000));
  s->seek(10);  // backwards
  ASSERT_EQ(s->read_fully(buf, 100), 100u);
  EXPECT_EQ(std::string(buf, 100), bytes.substr(10, 100));
  s->seek(bytes.size());  // the end: nothing more, no error
  EXPECT_EQ(s->read(buf, 100), 0u);
  EXPECT_THROW(s->seek(bytes.size() + 1), Error);
  EXPECT_GE(stats->counters()["http_requests"], 3);
}

TEST_F(HttpStreamNginxTest, NotFoundFailsAtOnceNamingUrlAndStatus) {
  nginx_.start(root_);
  auto stats = std::make_shared<NodeStats>("http");
  std::string url = nginx_.url("no-such-shard.tfrecord");
  std::string msg = testing::error_of([&] { open_http_stream(url, fast_retry_options(stats)); });
  EXPECT_NE(msg.find("404"), std::string::npos) << msg;
  EXPECT_NE(msg.find(url), std::string::npos) << msg;
  EXPECT_EQ(stats->counters()["http_requests"], 1) << "a 404 is not retried";
  EXPECT_EQ(stats->counters()["http_retries"], 0);
  try {
    open_http_stream(url, {});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST_F(HttpStreamNginxTest, NginxStoppedAndRestartedMidTransferDeliversEveryByteOnce) {
  NginxServerOptions slow;
  slow.limit_rate = "1m";  // 3 MiB take about 3 s: long enough to interrupt
  nginx_.start(root_, slow);
  const std::string& bytes = files_["file-3145728.bin"];
  auto stats = std::make_shared<NodeStats>("http");
  StreamOptions o;
  o.stats = stats;
  o.backoff_initial_s = 0.1;
  o.backoff_max_s = 1;
  o.max_retries = 20;  // enough for the outage below
  auto s = open_http_stream(nginx_.url("file-3145728.bin"), o);
  std::string got(512 << 10, '\0');
  ASSERT_EQ(s->read_fully(got.data(), got.size()), got.size());
  nginx_.stop();
  // The reader runs on its own thread through the outage; nginx is restarted from this
  // thread (nginx dies with the thread that started it: PR_SET_PDEATHSIG).
  std::string rest;
  std::string error;
  std::thread reader([&] {
    try {
      rest = read_all(*s);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  nginx_.restart();
  reader.join();
  ASSERT_EQ(error, "");
  got += rest;
  EXPECT_EQ(got.size(), bytes.size());
  EXPECT_TRUE(got == bytes) << "bytes lost or repeated across the restart";
  auto c = stats->counters();
  EXPECT_GE(c["http_retries"], 1);
  EXPECT_GE(c["http_resumed"], 1);
  EXPECT_LT(c["http_bytes"], static_cast<int64_t>(2 * bytes.size())) << "resumed, not restarted";
}

TEST_F(HttpStreamNginxTest, ManyStreamsOnManyThreads) {
  nginx_.start(root_);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        for (const auto& [name, bytes] : files_) {
          auto s = open_http_stream(nginx_.url(name), {});
          if (read_all(*s, 10007) != bytes) ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- faults from the scripted server ------------------------------------------------

TEST(HttpStreamFaultTest, ServiceUnavailableIsRetriedThenSucceeds) {
  std::string body = random_bytes(100000, 7);
  ScriptedServer server(body, [](int i) { return Reply{i < 2 ? 503 : 200}; });
  auto stats = std::make_shared<NodeStats>("http");
  auto s = open_http_stream(server.url(), fast_retry_options(stats));
  EXPECT_TRUE(read_all(*s) == body);
  auto c = stats->counters();
  EXPECT_EQ(c["http_requests"], 3);
  EXPECT_EQ(c["http_retries"], 2);
  EXPECT_EQ(c["http_resumed"], 0);
}

TEST(HttpStreamFaultTest, BodyCutShortIsResumedWithRange) {
  std::string body = random_bytes(500000, 8);
  ScriptedServer server(body, [](int i) {
    Reply r;
    if (i < 2) r.cut_after = 100000;  // two cuts: 100000, then 200000 bytes delivered
    return r;
  });
  auto stats = std::make_shared<NodeStats>("http");
  auto s = open_http_stream(server.url(), fast_retry_options(stats));
  EXPECT_TRUE(read_all(*s, 3001) == body);
  auto ranges = server.ranges();
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "100000-");
  EXPECT_EQ(ranges[2], "200000-");
  auto c = stats->counters();
  EXPECT_EQ(c["http_resumed"], 2);
  EXPECT_EQ(c["http_bytes"], 500000);
}

TEST(HttpStreamFaultTest, ServerIgnoringRangeIsDetectedAndPrefixSkipped) {
  std::string body = random_bytes(300000, 9);
  ScriptedServer server(body, [](int i) {
    Reply r;
    r.honor_range = false;
    if (i == 0) r.cut_after = 123457;
    return r;
  });
  auto stats = std::make_shared<NodeStats>("http");
  auto s = open_http_stream(server.url(), fast_retry_options(stats));
  EXPECT_TRUE(read_all(*s) == body);
  EXPECT_EQ(server.ranges().at(1), "123457-");
  auto c = stats->counters();
  EXPECT_EQ(c["http_range_ignored"], 1);
  EXPECT_EQ(c["http_bytes"], 123457 + 300000);
}

TEST(HttpStreamFaultTest, ForbiddenFailsAtOnce) {
  ScriptedServer server("x", [](int) { return Reply{403}; });
  auto stats = std::make_shared<NodeStats>("http");
  std::string msg =
      testing::error_of([&] { open_http_stream(server.url(), fast_retry_options(stats)); });
  EXPECT_NE(msg.find("403"), std::string::npos) << msg;
  EXPECT_NE(msg.find(server.url()), std::string::npos) << msg;
  EXPECT_EQ(server.ranges().size(), 1u);
}

TEST(HttpStreamFaultTest, ExhaustedRetriesNameUrlTriesAndLastError) {
  std::string url = "http://127.0.0.1:" + std::to_string(testing::free_loopback_port()) + "/x";
  StreamOptions o = fast_retry_options();
  o.max_retries = 3;
  std::string msg = testing::error_of([&] { open_http_stream(url, o); });
  EXPECT_NE(msg.find("after 4 tries"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Couldn't connect"), std::string::npos) << msg;
  EXPECT_NE(msg.find(url), std::string::npos) << msg;
}

TEST(HttpStreamFaultTest, PersistentServerErrorExhaustsRetries) {
  ScriptedServer server("x", [](int) { return Reply{500}; });
  StreamOptions o = fast_retry_options();
  o.max_retries = 2;
  std::string msg = testing::error_of([&] { open_http_stream(server.url(), o); });
  EXPECT_NE(msg.find("after 3 tries, last error: HTTP 500"), std::string::npos) << msg;
  EXPECT_EQ(server.ranges().size(), 3u);
}

}  // namespace
}  // namespace dataecho
