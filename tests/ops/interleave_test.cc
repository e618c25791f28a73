#include <gtest/gtest.h>

#include "dataecho/ops/interleave.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::vector<int64_t> interleaved(int64_t n, int64_t shards, int64_t cycle, int64_t parallelism) {
  auto it = make_interleave(make_range({n, shards}), {cycle, parallelism, 2})->make_iterator({});
  return ids(drain(*it));
}

TEST(Interleave, RoundRobinOverOpenShardsThenRefills) {
  // shards: [0..3] [4..7] [8..11]
  std::vector<int64_t> want = {0, 4, 1, 5, 2, 6, 3, 7, 8, 9, 10, 11};
  EXPECT_EQ(interleaved(12, 3, 2, 0), want);
  EXPECT_EQ(interleaved(12, 3, 2, -1), want) << "parallel fetch keeps the order";
}

TEST(Interleave, UnevenShardsAndLargeCycle) {
  auto seq = interleaved(103, 7, 16, 0);
  auto par = interleaved(103, 7, 16, -1);
  EXPECT_EQ(seq, par);
  std::sort(seq.begin(), seq.end());
  EXPECT_EQ(seq, iota(103));
}

TEST(Interleave, NeedsShards) {
  std::string msg = error_of([] { make_interleave(make_range({10}), {}); });
  EXPECT_NE(msg.find("no shards"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dataecho::testing
