// The HTTP stream's read-ahead ring: bytes come out in the order they went in, through
// wrap-arounds and the growth of its memory, and it never holds more than its capacity.
#include "io/ring_buffer.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>

namespace dataecho::testing {
namespace {

TEST(RingBuffer, BytesComeOutInOrderThroughWrapsAndGrowth) {
  for (size_t capacity : {size_t{1}, size_t{1000}, size_t{200000}, size_t{1} << 20}) {
    SCOPED_TRACE(capacity);
    http::RingBuffer ring(capacity);
    std::deque<char> want;
    std::mt19937_64 rng(capacity);
    std::string in, out;
    uint8_t next = 0;
    for (int step = 0; step < 2000; ++step) {
      const size_t push = std::min<size_t>(rng() % (capacity / 3 + 2), ring.room());
      in.resize(push);
      for (char& c : in) c = static_cast<char>(next++);
      ring.push(in.data(), in.size());
      want.insert(want.end(), in.begin(), in.end());
      ASSERT_LE(ring.size(), ring.capacity());
      out.resize(rng() % (capacity / 2 + 2));
      out.resize(ring.pop(out.data(), out.size()));
      ASSERT_EQ(out, std::string(want.begin(), want.begin() + out.size()));
      want.erase(want.begin(), want.begin() + out.size());
      ASSERT_EQ(ring.size(), want.size());
    }
  }
}

TEST(RingBuffer, GrowToTakesOneChunkLargerThanTheRingWhenEmpty) {
  http::RingBuffer ring(16);
  const std::string big(100, 'x');
  ring.grow_to(big.size());
  EXPECT_EQ(ring.capacity(), 100u);
  ring.push(big.data(), big.size());
  std::string out(100, '\0');
  EXPECT_EQ(ring.pop(out.data(), 40), 40u);
  ring.grow_to(1000);  // not empty: unchanged
  EXPECT_EQ(ring.capacity(), 100u);
  EXPECT_EQ(ring.pop(nullptr, 100), 60u);  // a skip
  EXPECT_EQ(ring.size(), 0u);
}

}  // namespace
}  // namespace dataecho::testing
