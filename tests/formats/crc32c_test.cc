// CRC-32C: every implementation this CPU has (AVX-512 folding, SSE4.2 three interleaved
// streams joined with shift tables, the table fallback) against a bitwise reference, on
// random lengths and alignments that cover every block-size boundary (the folding's
// 1,024-byte minimum and 256-byte blocks, the three-way loop's 3 x 8 KiB and 3 x 256 B),
// with and without the copy that extend_copy makes on the way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dataecho/formats/crc32c.h"

namespace dataecho {
namespace {

uint32_t bitwise_extend(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(crc32c::value("123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c::extend_portable(0, "123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c::value("", 0), 0u);
  // RFC 3720 (iSCSI) B.4 test vectors: 32 bytes of zeros, of 0xff, and ascending.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), asc(32);
  for (int i = 0; i < 32; ++i) asc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c::value(zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(crc32c::value(ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c::value(asc.data(), 32), 0x46dd794eu);
}

TEST(Crc32c, FastPathEqualsBitwiseOnRandomLengthsAndAlignments) {
  constexpr size_t kMax = 100000;
  std::vector<uint8_t> buf = random_bytes(kMax + 16, 1);
  std::mt19937_64 rng(2);
  std::vector<size_t> lengths = {0,     1,     7,     8,     767,   768,   769,
                                 24575, 24576, 24577, 25343, 25344, 49152, kMax};
  for (int i = 0; i < 300; ++i) lengths.push_back(rng() % (kMax + 1));
  for (size_t n : lengths) {
    size_t offset = rng() % 16;
    uint32_t start = (rng() % 2) ? static_cast<uint32_t>(rng()) : 0;
    const uint8_t* p = buf.data() + offset;
    uint32_t want = bitwise_extend(start, p, n);
    EXPECT_EQ(crc32c::extend(start, p, n), want) << "n=" << n << " offset=" << offset;
    EXPECT_EQ(crc32c::extend_portable(start, p, n), want) << "n=" << n << " offset=" << offset;
  }
}

TEST(Crc32c, EveryImplementationEqualsBitwiseAndCopiesExactly) {
  constexpr size_t kMax = 70000;
  std::vector<uint8_t> buf = random_bytes(kMax + 64, 5);
  std::mt19937_64 rng(6);
  std::vector<size_t> lengths = {0,    1,    255,  256,  257,   1023,  1024,
                                 1025, 1279, 1280, 1281, 24576, 24577, kMax};
  for (int i = 0; i < 200; ++i) lengths.push_back(rng() % (kMax + 1));
  int tested = 0;
  for (auto impl : {crc32c::Impl::kTable, crc32c::Impl::kSse42, crc32c::Impl::kAvx512}) {
    if (!crc32c::supported(impl)) continue;
    ++tested;
    for (size_t n : lengths) {
      size_t offset = rng() % 64;
      uint32_t start = (rng() % 2) ? static_cast<uint32_t>(rng()) : 0;
      const uint8_t* p = buf.data() + offset;
      uint32_t want = bitwise_extend(start, p, n);
      std::string where = "impl " + std::to_string(static_cast<int>(impl)) +
                          " n=" + std::to_string(n) + " offset=" + std::to_string(offset);
      EXPECT_EQ(crc32c::extend_with(impl, start, nullptr, p, n), want) << where;
      // With the copy: into a destination with its own misalignment, guarded on both sides.
      std::vector<uint8_t> out(n + 80, 0xa5);
      size_t d = rng() % 64;
      EXPECT_EQ(crc32c::extend_with(impl, start, out.data() + d, p, n), want) << where;
      EXPECT_TRUE(std::equal(p, p + n, out.begin() + static_cast<std::ptrdiff_t>(d))) << where;
      for (size_t i = 0; i < d; ++i) ASSERT_EQ(out[i], 0xa5) << where << " byte before";
      for (size_t i = d + n; i < out.size(); ++i) ASSERT_EQ(out[i], 0xa5) << where << " byte after";
    }
  }
  EXPECT_GE(tested, 1);
  EXPECT_TRUE(crc32c::supported(crc32c::best_impl()));
}

TEST(Crc32c, ExtendInPiecesEqualsWhole) {
  std::vector<uint8_t> buf = random_bytes(200000, 3);
  uint32_t whole = crc32c::value(buf.data(), buf.size());
  EXPECT_EQ(whole, bitwise_extend(0, buf.data(), buf.size()));
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    uint32_t c = 0;
    size_t pos = 0;
    while (pos < buf.size()) {
      size_t n = std::min<size_t>(buf.size() - pos, rng() % 60000);
      c = crc32c::extend(c, buf.data() + pos, n);
      pos += n;
    }
    EXPECT_EQ(c, whole) << "trial " << trial;
  }
}

TEST(Crc32c, MaskRoundTrips) {
  EXPECT_EQ(crc32c::unmask(crc32c::mask(0x12345678u)), 0x12345678u);
  EXPECT_NE(crc32c::mask(0x12345678u), 0x12345678u);
}

}  // namespace
}  // namespace dataecho
