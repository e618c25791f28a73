#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "counting_source.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/prefetch.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

TEST(Prefetch, PassesEverythingInOrder) {
  auto it = make_prefetch(make_range({1000}), {4})->make_iterator({});
  EXPECT_EQ(ids(drain(*it)), iota(1000));
}

TEST(Prefetch, SlowConsumerBlocksTheProducerAtTheBound) {
  auto src = std::make_shared<CountingSource>(1000);
  auto it = make_prefetch(src, {8})->make_iterator({});
  ASSERT_TRUE(it->next());
  // Give the producer every chance to run ahead; it must stop at the bound. (It may
  // stop short of it: a producer that found the buffer full is woken only once the
  // buffer is down to half, to refill several elements per wake-up.)
  for (int i = 0; i < 50 && src->pulled() < 9; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(src->pulled(), 1 + 8);
  EXPECT_GE(src->pulled(), 1 + 4) << "the producer ran ahead of the consumer";
  // Draining the buffer lets it go on, never past the bound.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(it->next());
  for (int i = 0; i < 50 && src->pulled() < 7 + 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(src->pulled(), 7 + 8);
  EXPECT_GE(src->pulled(), 7 + 4);
}

TEST(Prefetch, DeliversInputErrorsAfterEarlierElements) {
  MapOptions mo;
  mo.name = "boom";
  mo.fn = [](Example e, const MapContext&) {
    if (e.id() == 3) throw std::runtime_error("kaput");
    return e;
  };
  auto it = make_prefetch(make_map(make_range({10}), mo), {4})->make_iterator({});
  for (int i = 0; i < 3; ++i) ASSERT_EQ(it->next()->id(), i);
  std::string msg = error_of([&] { it->next(); });
  EXPECT_NE(msg.find("kaput"), std::string::npos) << msg;
  EXPECT_NE(msg.find("id 3"), std::string::npos) << msg;
  EXPECT_FALSE(it->next()) << "the stream ends after the error";
}

}  // namespace
}  // namespace dataecho::testing
