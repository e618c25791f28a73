#include <gtest/gtest.h>

#include <algorithm>

#include "counting_source.h"
#include "dataecho/ops/basic.h"
#include "dataecho/ops/shuffle.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::vector<int64_t> shuffled(int64_t n, int64_t buffer, uint64_t seed) {
  auto it = make_shuffle(make_range({n}), {buffer, seed, true})->make_iterator({});
  return ids(drain(*it));
}

TEST(Shuffle, IsAPermutation) {
  auto out = shuffled(1000, 100, 1);
  EXPECT_NE(out, iota(1000));
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, iota(1000));
}

TEST(Shuffle, SameSeedSameOrderOtherSeedOtherOrder) {
  EXPECT_EQ(shuffled(500, 64, 7), shuffled(500, 64, 7));
  EXPECT_NE(shuffled(500, 64, 7), shuffled(500, 64, 8));
}

TEST(Shuffle, BufferOfOneIsIdentity) { EXPECT_EQ(shuffled(50, 1, 3), iota(50)); }

TEST(Shuffle, ReshufflesEachEpochUnderRepeat) {
  auto it = make_repeat(make_shuffle(make_range({100}), {100, 5, true}), 2)->make_iterator({});
  auto out = ids(drain(*it));
  ASSERT_EQ(out.size(), 200u);
  std::vector<int64_t> a(out.begin(), out.begin() + 100), b(out.begin() + 100, out.end());
  EXPECT_NE(a, b);
  std::sort(b.begin(), b.end());
  EXPECT_EQ(b, iota(100));

  auto same = make_repeat(make_shuffle(make_range({100}), {100, 5, false}), 2)->make_iterator({});
  auto out2 = ids(drain(*same));
  EXPECT_EQ(std::vector<int64_t>(out2.begin(), out2.begin() + 100),
            std::vector<int64_t>(out2.begin() + 100, out2.end()));
}

TEST(Shuffle, NeverReadsMoreThanItsBufferAhead) {
  auto src = std::make_shared<CountingSource>(1000);
  auto it = make_shuffle(src, {50, 1, true})->make_iterator({});
  for (int k = 1; k <= 200; ++k) {
    ASSERT_TRUE(it->next());
    EXPECT_LE(src->pulled(), k + 50);
  }
}

}  // namespace
}  // namespace dataecho::testing
