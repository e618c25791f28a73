// GzipSniffingReader over a stream whose bytes arrive a few at a time, as over a slow
// link: the reader decodes what has arrived and never waits for a whole chunk first.
#include "formats/gzip_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>

#include "test_util.h"

namespace dataecho::testing {
namespace {

// Thrown when the reader asks for a byte that has not arrived yet: a real network stream
// would block there until it came.
struct WouldWait : std::runtime_error {
  WouldWait() : std::runtime_error("the reader waited for bytes that had not arrived") {}
};

// The bytes of `data`, of which the first `arrived` have arrived; each read returns at
// most `packet` bytes (a network stream returns what it has).
class ArrivingStream : public ByteStream {
 public:
  ArrivingStream(std::string data, size_t packet, size_t* arrived)
      : data_(std::move(data)), packet_(packet), arrived_(arrived) {}
  size_t read(void* dst, size_t n) override {
    if (pos_ == data_.size() || n == 0) return 0;
    const size_t have = std::min(*arrived_, data_.size()) - std::min(pos_, *arrived_);
    if (have == 0) throw WouldWait();
    const size_t k = std::min({n, packet_, have});
    std::memcpy(dst, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  uint64_t position() const override { return pos_; }
  void seek(uint64_t) override { throw std::logic_error("not used"); }
  int64_t size() const override { return -1; }
  const std::string& uri() const override { return uri_; }

 private:
  std::string data_;
  size_t packet_;
  size_t* arrived_;
  size_t pos_ = 0;
  std::string uri_ = "arriving://test";
};

// Lines of random lowercase words: about 0.6 compressed bytes a byte, so its gzip form is
// several of the reader's 256 KiB chunks.
std::string random_text(size_t bytes) {
  std::mt19937 rng(7);
  std::string s;
  while (s.size() < bytes) {
    s.push_back(static_cast<char>(rng() % 30 < 26 ? 'a' + rng() % 26 : (rng() % 2 ? ' ' : '\n')));
  }
  return s;
}

// Reads from `r` until it has `want` bytes in all or the stream would wait.
std::string read_available(GzipSniffingReader& r, size_t want) {
  std::string out(want, '\0');
  size_t got = 0;
  try {
    while (got < want) {
      const size_t k = r.read(out.data() + got, want - got);
      if (k == 0) break;
      got += k;
    }
  } catch (const WouldWait&) {
  }
  out.resize(got);
  return out;
}

TEST(GzipSniffingReaderTest, DecodesGzipBytesAsTheyArrive) {
  const std::string text = random_text(1 << 20);
  const std::string gz = gzip_bytes(text);
  ASSERT_GT(gz.size(), 2u * (256u << 10));  // several chunks
  size_t arrived = 1000;                    // less than the 64 KiB sniff and the 256 KiB chunk
  GzipSniffingReader r(std::make_unique<ArrivingStream>(gz, 4096, &arrived));
  ASSERT_TRUE(r.compressed());
  const std::string first = read_available(r, text.size());
  ASSERT_GT(first.size(), 0u) << "nothing decoded from the first 1,000 bytes";
  EXPECT_EQ(first, text.substr(0, first.size()));
  EXPECT_LE(r.compressed_position(), arrived);

  arrived += 70 << 10;  // a refill: again less than a chunk
  const std::string second = read_available(r, text.size());
  ASSERT_GT(second.size(), 0u) << "nothing decoded after 70 KiB more arrived";
  EXPECT_EQ(second, text.substr(first.size(), second.size()));

  arrived = gz.size();  // the rest: the whole text, and then the end
  const std::string rest = read_available(r, text.size());
  EXPECT_EQ(first + second + rest, text);
  char c;
  EXPECT_EQ(r.read(&c, 1), 0u);
}

TEST(GzipSniffingReaderTest, PassesPlainBytesOnAsTheyArrive) {
  const std::string text = random_text(200 << 10);
  size_t arrived = 10;
  GzipSniffingReader r(std::make_unique<ArrivingStream>(text, 4096, &arrived));
  ASSERT_FALSE(r.compressed());
  EXPECT_EQ(read_available(r, text.size()), text.substr(0, 10));
  arrived = text.size();
  EXPECT_EQ(read_available(r, text.size()), text.substr(10));
}

TEST(GzipSniffingReaderTest, ASniffOfOneByteWaitsForTheSecond) {
  // One byte at a time: the sniff needs both magic bytes before it can tell gzip.
  const std::string gz = gzip_bytes("one line\n");
  size_t arrived = gz.size();
  GzipSniffingReader r(std::make_unique<ArrivingStream>(gz, 1, &arrived));
  EXPECT_TRUE(r.compressed());
  EXPECT_EQ(read_available(r, 100), "one line\n");
}

}  // namespace
}  // namespace dataecho::testing
