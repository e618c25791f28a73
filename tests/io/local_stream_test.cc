#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "dataecho/io/byte_stream.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;
using testing::temp_dir;

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

StreamOptions small_buffer(size_t n) {
  StreamOptions o;
  o.buffer_bytes = n;
  return o;
}

std::string pattern_bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

TEST(LocalStream, ReadsEveryByteThroughASmallBuffer) {
  std::string data = pattern_bytes(10007);
  std::string path = write_file("a.bin", data);
  StreamOptions o;
  o.buffer_bytes = 64;
  auto s = open_stream(path, o);
  EXPECT_EQ(s->size(), 10007);
  EXPECT_EQ(s->uri(), path);
  std::string got;
  char chunk[37];
  size_t n;
  while ((n = s->read(chunk, sizeof chunk)) > 0) {
    got.append(chunk, n);
    EXPECT_EQ(s->position(), got.size());
  }
  EXPECT_EQ(got, data);
  EXPECT_EQ(s->read(chunk, sizeof chunk), 0u) << "stays at the end";
}

TEST(LocalStream, LargeReadsBypassTheBufferAndReadFullyStopsAtEnd) {
  std::string data = pattern_bytes(5000);
  auto s = open_stream(write_file("b.bin", data), small_buffer(100));
  std::string got(3000, '\0');
  EXPECT_EQ(s->read_fully(got.data(), 10), 10u);
  EXPECT_EQ(s->read_fully(got.data() + 10, 2990), 2990u);
  EXPECT_EQ(got, data.substr(0, 3000));
  std::string rest(4000, '\0');
  EXPECT_EQ(s->read_fully(rest.data(), rest.size()), 2000u);
  EXPECT_EQ(rest.substr(0, 2000), data.substr(3000));
  EXPECT_EQ(s->position(), 5000u);
}

TEST(LocalStream, SeekContinuesFromTheOffset) {
  std::string data = pattern_bytes(4096);
  auto s = open_stream(write_file("c.bin", data), small_buffer(256));
  char buf[100];
  s->read_fully(buf, 100);
  s->seek(1000);
  EXPECT_EQ(s->position(), 1000u);
  ASSERT_EQ(s->read_fully(buf, 100), 100u);
  EXPECT_EQ(std::string(buf, 100), data.substr(1000, 100));
  s->seek(10);
  ASSERT_EQ(s->read_fully(buf, 5), 5u);
  EXPECT_EQ(std::string(buf, 5), data.substr(10, 5));
  s->seek(4096);
  EXPECT_EQ(s->read(buf, 1), 0u);
}

TEST(LocalStream, FileUrlAndEmptyFile) {
  std::string path = write_file("empty.bin", "");
  auto s = open_stream("file://" + path);
  EXPECT_EQ(s->size(), 0);
  char c;
  EXPECT_EQ(s->read(&c, 1), 0u);
}

TEST(LocalStream, MissingFileIsAnErrorNamingIt) {
  std::string msg = error_of([] { open_stream("/nonexistent/dir/x.tfrecord"); });
  EXPECT_NE(msg.find("/nonexistent/dir/x.tfrecord"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  msg = error_of([] { open_stream(temp_dir()); });
  EXPECT_NE(msg.find("directory"), std::string::npos) << msg;
}

TEST(LocalStream, HttpDispatch) {
  EXPECT_TRUE(is_http_uri("http://127.0.0.1/x"));
  EXPECT_TRUE(is_http_uri("HTTPS://example/x"));
  EXPECT_FALSE(is_http_uri("/data/http://x"));
  EXPECT_FALSE(is_http_uri("file:///x"));
}

TEST(LocalStream, CountsBytesInStats) {
  auto stats = std::make_shared<NodeStats>("0:test");
  StreamOptions o;
  o.stats = stats;
  auto s = open_stream(write_file("d.bin", pattern_bytes(1234)), o);
  std::string buf(2000, '\0');
  s->read_fully(buf.data(), buf.size());
  EXPECT_EQ(stats->counter("io_bytes").load(), 1234);
}

}  // namespace
}  // namespace dataecho
