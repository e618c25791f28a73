// Adaptive echo's choices (EchoPool, src/ops/adaptive_echo.h) and a parallel map's take
// size (map_claim_size, src/ops/map_claim.h) on made-up inputs, without threads or sleeps:
// the test says when a fresh element is ready (what adaptive echo decides on) or what
// a map function costs, and checks the exact outcome. The same behaviour in real time, with
// threads and sleeps, is in echo_test.cc and map_test.cc (suites named *Timing).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "dataecho/core/tensor.h"
#include "ops/adaptive_echo.h"
#include "ops/map_claim.h"

namespace dataecho {
namespace {

// Adaptive echo's next() with the input's timing given: a fresh element when one is
// `ready`, or when there is nothing to repeat (the iterator then waits for it); else a
// repeat. Fresh elements are 0, 1, 2, ... of `bytes` bytes each. Each output is "id/echo".
struct Driven {
  EchoPool pool;
  int64_t bytes;
  int64_t next_id = 0;
  Driven(size_t cap, size_t cap_bytes, int64_t copies, int64_t element_bytes = 0, uint64_t seed = 1)
      : pool(cap, cap_bytes, copies, Rng(seed)), bytes(element_bytes) {}
  std::string next(bool ready) {
    Example e;
    if (ready || pool.empty()) {
      e = Example(next_id++);
      if (bytes > 0)
        e.set("payload", Tensor::from_vector(std::vector<uint8_t>(static_cast<size_t>(bytes), 7)));
      pool.fresh(e);
    } else {
      e = pool.repeat();
    }
    return std::to_string(e.id()) + "/" + std::to_string(e.echo());
  }
  // `calls` calls, a fresh element ready at every `every`-th (the first included).
  std::vector<std::string> run(int calls, int every) {
    std::vector<std::string> out;
    for (int i = 0; i < calls; ++i) out.push_back(next(i % every == 0));
    return out;
  }
};

TEST(EchoPool, AnInputRTimesSlowerGetsRCopiesOfEachElement) {
  // A fresh element every 4th call, a cap of 8 copies: each element 4 times, in order.
  Driven d(1024, 0, 8);
  EXPECT_EQ(d.run(12, 4), (std::vector<std::string>{"0/0", "0/1", "0/2", "0/3", "1/0", "1/1", "1/2",
                                                    "1/3", "2/0", "2/1", "2/2", "2/3"}));
}

TEST(EchoPool, TheCapOnCopiesIsNeverExceededAndALateElementIsWaitedFor) {
  // At most 3 copies: after 3, nothing is left to repeat, and the next call waits for
  // the late fresh element.
  Driven d(1024, 0, 3);
  EXPECT_EQ(d.next(true), "0/0");
  EXPECT_EQ(d.next(false), "0/1");
  EXPECT_EQ(d.next(false), "0/2");
  EXPECT_TRUE(d.pool.empty());
  EXPECT_EQ(d.next(false), "1/0");
  EXPECT_EQ(d.next(false), "1/1");
  EXPECT_EQ(d.next(false), "1/2");
  // A fresh element every 3rd call: each has its 3 copies.
  EXPECT_EQ(d.run(6, 3), (std::vector<std::string>{"2/0", "2/1", "2/2", "3/0", "3/1", "3/2"}));
  // A cap of 1: no repeats at all (the echo passes its input through).
  Driven one(1024, 0, 1);
  EXPECT_EQ(one.run(3, 4), (std::vector<std::string>{"0/0", "1/0", "2/0"}));
}

TEST(EchoPool, AnInputAlwaysReadyIsNeverRepeated) {
  Driven d(1024, 0, 8);
  EXPECT_EQ(d.run(4, 1), (std::vector<std::string>{"0/0", "1/0", "2/0", "3/0"}));
}

TEST(EchoPool, TheLeastRepeatedComesFirstTiesBrokenByTheSeed) {
  // Three fresh elements, then six repeats: each candidate once before any twice.
  auto repeats = [](uint64_t seed) {
    Driven d(1024, 0, 8, 0, seed);
    for (int i = 0; i < 3; ++i) d.next(true);
    std::vector<std::string> out;
    for (int i = 0; i < 6; ++i) out.push_back(d.next(false));
    return out;
  };
  const auto a = repeats(1);
  EXPECT_EQ(a, repeats(1)) << "the same seed, the same choices";
  std::set<std::string> first(a.begin(), a.begin() + 3), second(a.begin() + 3, a.end());
  EXPECT_EQ(first, (std::set<std::string>{"0/1", "1/1", "2/1"}));
  EXPECT_EQ(second, (std::set<std::string>{"0/2", "1/2", "2/2"}));
  bool some_seed_differs = false;
  for (uint64_t seed = 2; seed < 20 && !some_seed_differs; ++seed)
    some_seed_differs = repeats(seed) != a;
  EXPECT_TRUE(some_seed_differs);
}

TEST(EchoPool, AFullPoolDropsTheMostRepeatedThenTheOldest) {
  Driven d(3, 0, 8);
  EXPECT_EQ(d.next(true), "0/0");
  EXPECT_EQ(d.next(false), "0/1");  // 0 has 2 copies now
  d.next(true), d.next(true);       // 1, 2: the pool is full
  d.next(true);                     // 3: 0 goes (the most repeated)
  d.next(true);                     // 4: 1 goes (the oldest of those at 1 copy)
  std::set<std::string> repeated;
  for (int i = 0; i < 3; ++i) repeated.insert(d.next(false));
  EXPECT_EQ(repeated, (std::set<std::string>{"2/1", "3/1", "4/1"}));
}

TEST(EchoPool, ThePoolKeepsWhatFitsInItsBytes) {
  // Elements of 1,000 bytes, 5,000 bytes of pool: the 5 most recent of 20.
  Driven d(1024, 5000, 100, 1000);
  for (int i = 0; i < 20; ++i) d.next(true);
  EXPECT_EQ(d.pool.size(), 5u);
  EXPECT_EQ(d.pool.bytes(), 5000u);
  std::set<std::string> repeated;
  for (int i = 0; i < 5; ++i) repeated.insert(d.next(false));
  EXPECT_EQ(repeated, (std::set<std::string>{"15/1", "16/1", "17/1", "18/1", "19/1"}));
}

TEST(EchoPool, ALoweredCapForgetsTheCandidatesAtIt) {
  Driven d(1024, 0, 4);
  EXPECT_EQ(d.run(3, 4), (std::vector<std::string>{"0/0", "0/1", "0/2"}));  // 0: 3 copies
  EXPECT_EQ(d.next(true), "1/0");
  d.pool.set_copies(2);  // the tuner lowers the cap: 0 goes, 1 may be repeated once
  EXPECT_EQ(d.pool.size(), 1u);
  EXPECT_EQ(d.next(false), "1/1");
  EXPECT_TRUE(d.pool.empty());
  d.pool.set_copies(1);
  EXPECT_EQ(d.next(true), "2/0");
  EXPECT_TRUE(d.pool.empty()) << "a cap of 1 keeps no candidate";
  d.pool.set_copies(4);  // raised again: new elements are candidates
  EXPECT_EQ(d.next(true), "3/0");
  EXPECT_EQ(d.next(false), "3/1");
}

// ---------------------------------------------------------------- map takes

TEST(MapClaim, OneElementATimeUnlessTheFunctionIsCheap) {
  // Capacity 66 (parallelism 2 + buffer 64), 2 workers: at most 66 / 4 = 16 a take.
  EXPECT_EQ(map_claim_size(0, 66, 2, 0), 1u);      // not measured yet
  EXPECT_EQ(map_claim_size(300e3, 66, 2, 0), 1u);  // 300 us: one
  EXPECT_EQ(map_claim_size(100e3, 66, 2, 0), 1u);  // 100 us: one
  EXPECT_EQ(map_claim_size(10e3, 66, 2, 0), 10u);  // 10 us: 100 us of work
  EXPECT_EQ(map_claim_size(1e3, 66, 2, 0), 16u);   // 1 us: the share of half the capacity
  EXPECT_EQ(map_claim_size(1e3, 66, 2, 60), 6u);   // only the room left
  EXPECT_EQ(map_claim_size(1e3, 66, 2, 66), 1u);   // none left: one (the caller waits)
  EXPECT_EQ(map_claim_size(1e3, 18, 2, 0), 4u);    // the default buffer of 16
  EXPECT_EQ(map_claim_size(1e3, 3, 2, 0), 1u);     // a tiny capacity
}

TEST(MapClaim, TheDefaultBufferGrowsOnlyForCheapSmallElements) {
  EXPECT_EQ(map_cheap_buffer(0, 0), 0u);         // not measured yet: the usual 16
  EXPECT_EQ(map_cheap_buffer(1e6, 100), 0u);     // 1 ms a decoded image: none
  EXPECT_EQ(map_cheap_buffer(25e3, 100), 16u);   // 25 us: 400 us of work in 16
  EXPECT_EQ(map_cheap_buffer(1e3, 600), 400u);   // a tokenized line: 400 us of work
  EXPECT_EQ(map_cheap_buffer(1e3, 4096), 256u);  // 4 KiB results: 1 MiB of them
  EXPECT_EQ(map_cheap_buffer(50, 8), 1024u);     // scalars: at most 1,024
  EXPECT_EQ(map_cheap_buffer(50, 1 << 22), 0u);  // a cheap map of 4 MiB tensors: none
}

}  // namespace
}  // namespace dataecho
