// A pipeline built after set_engine_cpus() runs its threads (map workers, the prefetch's
// puller) on that set and leaves the consumer's thread alone: what `dataecho train
// --cpu-split` relies on (core/cpu_affinity.h).
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "counting_source.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/prefetch.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

// A map whose function records the CPUs of the thread that runs it.
struct CpuRecorder {
  std::mutex mu;
  std::set<std::vector<int>> seen;
  MapOptions map(int parallelism) {
    MapOptions o;
    o.name = "where";
    o.parallelism = parallelism;
    o.fn = [this](Example e, const MapContext&) {
      std::vector<int> cpus = allowed_cpus();
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(cpus);
      return e;
    };
    return o;
  }
};

TEST(CpuSplitPipeline, MapWorkersAndThePrefetchPullerRunOnTheEnginesSet) {
  std::vector<int> all = allowed_cpus();
  ASSERT_FALSE(all.empty());
  set_engine_cpus({all.back()});
  for (int p : {1, 2}) {
    SCOPED_TRACE(p);
    CpuRecorder where;
    // parallelism 1 runs the function on the prefetch's puller, 2 on the map's workers.
    auto it = make_prefetch(make_map(make_range({200}), where.map(p)), {8})->make_iterator({});
    EXPECT_EQ(drain(*it).size(), 200u);
    EXPECT_EQ(where.seen, (std::set<std::vector<int>>{{all.back()}}));
    EXPECT_EQ(allowed_cpus(), all) << "the consumer's thread is not pinned";
  }
  set_engine_cpus({});
  CpuRecorder where;
  auto it = make_map(make_range({50}), where.map(2))->make_iterator({});
  EXPECT_EQ(drain(*it).size(), 50u);
  EXPECT_EQ(where.seen, (std::set<std::vector<int>>{all})) << "no set: no pinning";
}

}  // namespace
}  // namespace dataecho::testing
