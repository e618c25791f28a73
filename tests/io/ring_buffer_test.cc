// The HTTP stream's read-ahead ring: bytes come out in the order they went in, through
// wrap-arounds and the growth of its memory, and it never holds more than its capacity.
#include "io/ring_buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

namespace dataecho::testing {
namespace {

// The bytes pushed are a running count (mod 256), so the bytes that must come out next are
// the count from the number popped so far: both sides are slices of one pattern, copied
// and compared whole (a model deque and byte loops made this test 60-90 s under TSan).
TEST(RingBuffer, BytesComeOutInOrderThroughWrapsAndGrowth) {
  std::string pattern(256 + (size_t{1} << 20), '\0');
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<char>(i);
  for (size_t capacity : {size_t{1}, size_t{1000}, size_t{200000}, size_t{1} << 20}) {
    SCOPED_TRACE(capacity);
    http::RingBuffer ring(capacity);
    std::mt19937_64 rng(capacity);
    std::string out;
    uint64_t pushed = 0, popped = 0;
    for (int step = 0; step < 2000; ++step) {
      const size_t push = std::min<size_t>(rng() % (capacity / 3 + 2), ring.room());
      ring.push(pattern.data() + pushed % 256, push);
      pushed += push;
      ASSERT_LE(ring.size(), ring.capacity());
      out.resize(rng() % (capacity / 2 + 2));
      out.resize(ring.pop(out.data(), out.size()));
      ASSERT_EQ(std::memcmp(out.data(), pattern.data() + popped % 256, out.size()), 0)
          << "bytes " << popped << "-" << popped + out.size() << " came out wrong at step " << step;
      popped += out.size();
      ASSERT_EQ(ring.size(), pushed - popped);
    }
    EXPECT_GT(popped, 0u);
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
