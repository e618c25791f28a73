// The job's epoch that a `service` source reads, set by the trainer's side (the source's
// "epoch" option, which Python's for_epoch sets): a source built for epoch k reads the
// dispatcher's epoch k, and a repeat after it k + 1, ...; in sharding "dynamic" that
// epoch's deal of the pieces to the lanes, in sharding "off" the workers' passes of that
// epoch. A dispatcher and workers over the in-process transport.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "dataecho/service/service.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/service.h"
#include "service/loopback_worker.h"
#include "service/transport.h"
#include "test_util.h"

namespace dataecho::service {
namespace {

using dataecho::testing::build;
using dataecho::testing::drain;
using dataecho::testing::error_of;
using dataecho::testing::ids;
using dataecho::testing::values;

constexpr int kLanes = 6;
constexpr int kConsumers = 2;
const std::string kRange = R"({"seed": 5, "source": {"kind": "range", "count": 3000}})";
const std::string kShuffled =
    R"({"seed": 7, "source": {"kind": "range", "count": 300},
        "stages": [{"op": "shuffle", "buffer": 300}]})";

class ServiceEpochs : public ::testing::Test {
 protected:
  void SetUp() override {
    set_default_transport(in_process_transport());
    DispatcherOptions d;
    d.bind = "127.0.0.1";
    dispatcher_ = start_service_dispatcher(d);
  }
  void TearDown() override {
    workers_.clear();
    dispatcher_.reset();
    set_default_transport(nullptr);
  }
  void start_workers(int n) {
    for (int w = 0; w < n; ++w) {
      workers_.push_back(start_service_worker(loopback_worker(dispatcher_->port())));
    }
  }
  // A pipeline spec of a service source of `upstream`; `more` adds fields to the source
  // object, `stages` the trainer's stages.
  std::string spec(const std::string& upstream, const std::string& more,
                   const std::string& stages = "[]") const {
    return R"({"source": {"kind": "service", "dispatcher": "127.0.0.1:)" +
           std::to_string(dispatcher_->port()) + R"(", "job": "train", "connect_timeout_s": 5, )" +
           R"("pipeline": )" + upstream + more + "}, \"stages\": " + stages + "}";
  }
  static std::string dynamic(int consumer, int64_t epoch) {
    return R"(, "sharding": "dynamic", "lanes": 6, "consumers": 2, "consumer": )" +
           std::to_string(consumer) + R"(, "epoch": )" + std::to_string(epoch);
  }
  // The ids of consumer r's lanes' pieces in the job's epoch `epoch`, sorted.
  static std::vector<int64_t> lanes_ids(int r, int64_t epoch) {
    const auto plan = service_plan_builder()(kRange, kLanes);
    const std::vector<int32_t> lanes = plan->lanes_of(epoch);
    std::vector<int64_t> out;
    for (size_t p = 0; p < plan->pieces.size(); ++p) {
      if (lanes[p] % kConsumers != r) continue;
      auto pipeline =
          service_piece_builder()(kRange, epoch, 0, [&](std::shared_ptr<const Dataset> s) {
            return make_piece_source(std::move(s), plan->pieces[p], 0, nullptr);
          });
      for (int64_t id : ids(drain(*pipeline))) out.push_back(id);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::vector<int64_t> sorted(std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  }
  // The ids of the elements whose rows carry epoch `epoch`, in order.
  static std::vector<int64_t> of_epoch(const std::vector<Example>& elements, int32_t epoch) {
    std::vector<int64_t> out;
    for (const Example& e : elements)
      if (e.row(0).epoch == epoch) out.push_back(e.id());
    return out;
  }

  std::unique_ptr<Dispatcher> dispatcher_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// Sharding "dynamic": each consumer of a source built for epoch 1 reads its lanes of the
// dispatcher's epoch 1 (the deal of that epoch, which differs from epoch 0's), each id
// once, its rows stamped 1; a repeat after a source built for epoch 1 reads epochs 1 and 2.
TEST_F(ServiceEpochs, ADynamicSourceBuiltForEpochOneReadsTheJobsEpochOne) {
  start_workers(2);
  ASSERT_NE(lanes_ids(0, 1), lanes_ids(0, 0));  // the epochs deal the pieces differently
  std::vector<int64_t> all;
  for (int r = 0; r < kConsumers; ++r) {
    auto p = build(spec(kRange, dynamic(r, 1)));
    const std::vector<Example> got = drain(*p);
    EXPECT_EQ(sorted(ids(got)), lanes_ids(r, 1)) << "consumer " << r;
    EXPECT_EQ(of_epoch(got, 1).size(), got.size());
    for (int64_t id : ids(got)) all.push_back(id);
  }
  EXPECT_EQ(sorted(all), dataecho::testing::iota(3000));

  auto p = build(spec(kRange, dynamic(0, 1), R"([{"op": "repeat", "count": 2}])"));
  const std::vector<Example> got = drain(*p);
  EXPECT_EQ(sorted(of_epoch(got, 1)), lanes_ids(0, 1));
  EXPECT_EQ(sorted(of_epoch(got, 2)), lanes_ids(0, 2));
  EXPECT_EQ(got.size(), lanes_ids(0, 1).size() + lanes_ids(0, 2).size());
}

// Sharding "off": a source built for epoch 1 reads the worker's pass of epoch 1, whose
// upstream shuffle draws from the seed salted by the epoch: another order than epoch 0's.
TEST_F(ServiceEpochs, AnOffModeSourceBuiltForEpochOneReadsTheWorkersPassOfEpochOne) {
  start_workers(1);
  const auto pass_of = [](int64_t epoch) {
    return values(drain(*service_upstream_builder()(kShuffled, 1, epoch, 0)));
  };
  ASSERT_NE(pass_of(1), pass_of(0));
  auto p = build(spec(kShuffled, R"(, "epoch": 1)"));
  EXPECT_EQ(values(drain(*p)), pass_of(1));
  auto q = build(spec(kShuffled, ""));
  EXPECT_EQ(values(drain(*q)), pass_of(0));
}

// The epoch is out of the state fingerprint; a saved state names its epoch, so that a
// state of epoch 1 restores into a source built for epoch 1 and is refused by one built
// for epoch 0, naming both.
TEST_F(ServiceEpochs, AStateRestoresOnlyIntoItsEpoch) {
  start_workers(1);
  const auto def = [&](int64_t epoch) {
    return PipelineDef::from_json(nlohmann::json::parse(spec(kRange, dynamic(0, epoch))));
  };
  EXPECT_EQ(def(1).fingerprint(), def(0).fingerprint());
  auto p = def(1).build();
  std::vector<int64_t> first;
  for (int i = 0; i < 200; ++i) first.push_back(p->next()->id());
  const std::string state = p->save();
  p.reset();
  auto other = def(0).build();
  const std::string refused = error_of([&] { other->restore(state); });
  EXPECT_CONTAINS(refused, "the saved state is of epoch 1, this iterator reads epoch 0");
  auto same = def(1).build();
  same->restore(state);
  for (int64_t id : ids(drain(*same))) first.push_back(id);
  EXPECT_EQ(sorted(first), lanes_ids(0, 1));
}

}  // namespace
}  // namespace dataecho::service
