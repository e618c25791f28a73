// SeqWindow (src/ops/seq_window.h): a parallel map's done results, by position after the
// next one to emit. Filed out of order, emitted in order; the ring grows across its wrap.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ops/seq_window.h"

namespace dataecho {
namespace {

std::vector<int> drain(SeqWindow<int>& w) {
  std::vector<int> out;
  while (w.front_filled()) out.push_back(w.pop_front());
  return out;
}

TEST(SeqWindow, EmitsInPositionOrderOnlyUpToTheFirstGap) {
  SeqWindow<int> w;
  w.put(2, 12);
  w.put(0, 10);
  w.put(3, 13);
  EXPECT_EQ(w.filled(), 3u);
  EXPECT_EQ(w.ready(10), 1u);  // position 1 is missing
  EXPECT_EQ(drain(w), std::vector<int>({10}));
  // Position 1 then was the front: offsets are counted from the front.
  w.put(0, 11);
  EXPECT_EQ(w.ready(10), 3u);
  EXPECT_EQ(w.ready(2), 2u);  // counted up to `most`
  EXPECT_EQ(drain(w), std::vector<int>({11, 12, 13}));
  EXPECT_TRUE(w.empty());
  EXPECT_FALSE(w.front_filled());
}

TEST(SeqWindow, GrowsAcrossTheRingsWrapAndKeepsTheOrder) {
  SeqWindow<int> w;
  int next_in = 0, next_out = 0;
  // Fill 10, emit 7, several times: the front walks round the ring, then a put far past
  // the end makes it grow while the front is in the middle.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 10; ++i) w.push_back(next_in++);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(w.pop_front(), next_out++);
  }
  const size_t held = w.filled();  // 15, in positions 0..14
  ASSERT_EQ(held, 15u);
  w.put(100, 1000);  // beyond a gap: the ring grows past 101 slots
  EXPECT_EQ(w.ready(1000), 15u);
  std::vector<int> seen;
  w.for_each([&](int v) { seen.push_back(v); });
  ASSERT_EQ(seen.size(), 16u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(seen[i], next_out + static_cast<int>(i));
  EXPECT_EQ(seen[15], 1000);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(w.pop_front(), next_out++);
  EXPECT_FALSE(w.front_filled());  // positions 0..84 now are the gap before 1000
  EXPECT_EQ(w.filled(), 1u);
  w.clear();
  EXPECT_TRUE(w.empty());
  w.push_back(7);
  EXPECT_EQ(drain(w), std::vector<int>({7}));
}

TEST(SeqWindow, HoldsMoveOnlyResults) {
  SeqWindow<std::unique_ptr<std::string>> w;
  w.put(1, std::make_unique<std::string>("b"));
  w.put(0, std::make_unique<std::string>("a"));
  EXPECT_EQ(*w.pop_front(), "a");
  EXPECT_EQ(*w.pop_front(), "b");
}

}  // namespace
}  // namespace dataecho
