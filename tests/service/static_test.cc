// Sharding "static": a real dispatcher and real workers over the in-process transport.
// Each consumer's sequence of (id, echo) is one fixed order (its lanes round robin, each
// lane's pieces in piece order, as static_order says), the same with one worker, three,
// and three of which one is killed or cut mid-epoch; a consumer resumed from a saved
// state continues that sequence; the consumers' sequences together hold the source's
// elements once each.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "dataecho/service/service.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/service.h"
#include "service/dispatcher_state.h"
#include "service/loopback_worker.h"
#include "service/static_merge.h"
#include "service/transport.h"
#include "test_util.h"

namespace dataecho::service {
namespace {

using dataecho::testing::drain;

constexpr int kLanes = 6;
constexpr int kConsumers = 2;

using Sequence = std::vector<std::pair<int64_t, int32_t>>;  // (id, echo), in order

Sequence sequence_of(const std::vector<Example>& elements) {
  Sequence s;
  for (const Example& e : elements) s.emplace_back(e.id(), e.echo());
  return s;
}

// 6,000 records in 24 pieces of 250, four frames each; with a filter, 2,000 of them in
// two frames a piece.
std::string upstream(bool filter) {
  return std::string(R"({"seed": 5, "source": {"kind": "range", "count": 6000}, "stages": [)") +
         (filter ? R"({"op": "filter", "fn": "id_mod", "args": {"mod": 3}}, )" : "") +
         R"({"op": "map", "fn": "identity"}]})";
}

// A fault on worker `worker` at the `nth` (from 0) call of its hook at `point`.
struct FaultAt {
  int worker = -1;  // -1: none
  std::string point;
  int nth = 0;
  Fault fault = Fault::kKill;
};

class ServiceStatic : public ::testing::Test {
 protected:
  void SetUp() override { set_default_transport(transport_); }
  void TearDown() override { set_default_transport(nullptr); }

  static std::string spec(int port, const std::string& up, int consumer) {
    return nlohmann::json{{"source",
                           {{"kind", "service"},
                            {"dispatcher", "127.0.0.1:" + std::to_string(port)},
                            {"job", "train"},
                            {"sharding", "static"},
                            {"lanes", kLanes},
                            {"consumers", kConsumers},
                            {"consumer", consumer},
                            {"buffer_mb", 1},
                            {"connect_timeout_s", 5},
                            {"pipeline", nlohmann::json::parse(up)}}}}
        .dump();
  }

  // Consumer r's sequence as static sharding defines it: its pieces of epoch 0 in
  // static_order, each piece's elements in the upstream's order.
  static Sequence expected(const std::string& up, int r) {
    const auto plan = service_plan_builder()(up, kLanes);
    std::vector<Example> all;
    for (int64_t p : static_order(plan->lanes_of(0), kConsumers, r)) {
      auto pipeline = service_piece_builder()(up, 0, 0, [&](std::shared_ptr<const Dataset> s) {
        return make_piece_source(std::move(s), plan->pieces[static_cast<size_t>(p)], 0, nullptr);
      });
      for (Example& e : drain(*pipeline)) all.push_back(std::move(e));
    }
    return sequence_of(all);
  }

  using Consume = std::function<std::vector<Example>(const PipelineDef& def)>;
  // Runs on this thread while the consumers read, given the workers.
  using During = std::function<void(std::vector<std::unique_ptr<Worker>>& workers)>;
  std::shared_ptr<Transport> transport_ = in_process_transport();
  std::atomic<int> frames_{0};  // frames the workers have sent

  // `count` records in pieces of 100, each two frames, `ms` a record.
  static std::string sleepy(int count, int ms) {
    return R"({"seed": 5, "source": {"kind": "range", "count": )" + std::to_string(count) +
           R"(}, "stages": [{"op": "map", "fn": "sleep", "args": {"ms": )" + std::to_string(ms) +
           "}}]}";
  }
  // Waits until the workers have sent `n` frames.
  void await_frames(int n) {
    for (int ms = 0; frames_ < n; ++ms) {
      ASSERT_LT(ms, 30'000) << "the workers sent " << frames_ << " frames";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  int port_ = 0;  // the dispatcher's, while run() runs

  // Both consumers' sequences of one epoch over `workers` workers with the fault;
  // `consume` reads a consumer's epoch (null: build and drain). Returns how many faults
  // happened.
  int run(const std::string& up, int workers, const FaultAt& fault, std::vector<Sequence>& got,
          const Consume& consume = nullptr, const During& during = nullptr) {
    DispatcherOptions d;
    d.bind = "127.0.0.1";
    auto dispatcher = start_service_dispatcher(d);
    port_ = dispatcher->port();
    std::mutex mu;
    std::map<std::pair<int, std::string>, int> calls;
    int fired = 0;
    std::vector<std::unique_ptr<Worker>> started;
    for (int w = 0; w < workers; ++w) {
      WorkerOptions o = loopback_worker(dispatcher->port());
      o.fault = [&, w](const std::string& point, int64_t) {
        std::lock_guard lock(mu);
        if (point == "frame") ++frames_;
        const int n = calls[{w, point}]++;
        if (fault.worker != w || fault.point != point || fault.nth != n) return Fault::kNone;
        ++fired;
        return fault.fault;
      };
      started.push_back(start_service_worker(o));
    }
    got.assign(kConsumers, {});
    std::vector<std::string> errors(kConsumers);
    std::vector<std::thread> consumers;
    for (int r = 0; r < kConsumers; ++r)
      consumers.emplace_back([&, r] {
        try {
          const auto def =
              PipelineDef::from_json(nlohmann::json::parse(spec(dispatcher->port(), up, r)));
          got[r] = sequence_of(consume ? consume(def) : drain(*def.build()));
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    if (during) during(started);
    for (auto& t : consumers) t.join();
    started.clear();
    for (int r = 0; r < kConsumers; ++r) EXPECT_EQ(errors[r], "") << "consumer " << r;
    return fired;
  }

  // Checks each consumer's sequence against its expected one, and that together they
  // are the source's elements once each.
  static void check(const std::string& up, const std::vector<Sequence>& got) {
    Sequence all;
    for (int r = 0; r < kConsumers; ++r) {
      const Sequence want = expected(up, r);
      ASSERT_EQ(got[r].size(), want.size()) << "consumer " << r;
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[r][i], want[i]) << "consumer " << r << " element " << i;
      all.insert(all.end(), got[r].begin(), got[r].end());
    }
    std::sort(all.begin(), all.end());
    auto whole = PipelineDef::from_json(nlohmann::json::parse(up)).build();
    Sequence source = sequence_of(drain(*whole));
    std::sort(source.begin(), source.end());
    EXPECT_EQ(all, source);
  }
};

// The merge alone: elements come piece by piece in any order and leave in the order
// given; a piece's turn ends when it is done; the position is the pieces returned and
// the records returned of the current one.
TEST(StaticMerge, ReturnsThePiecesInItsOrder) {
  EXPECT_EQ(static_order({0, 1, 2, 3, 0, 1, 2, 3, 3, 1}, 2, 1),
            (std::vector<int64_t>{1, 3, 5, 7, 9, 8}));
  StaticMerge m;
  std::set<int64_t> done;
  m.start(
      {5, 2, 7}, [](int64_t) { return false; }, [](int64_t) { return int64_t{0}; });
  const auto is_done = [&](int64_t p) { return done.count(p) > 0; };
  Example out;
  m.add(2, 0, Example(20), 8);
  m.add(7, 3, Example(73), 8);
  EXPECT_EQ(m.take(is_done, out), StaticMerge::Take::kWait);  // piece 5's turn
  EXPECT_TRUE(m.admits(5, 1 << 20, 64));                      // its first element always fits
  EXPECT_FALSE(m.admits(2, 24, 64));                          // read ahead: half the limit
  m.add(5, 4, Example(54), 8);
  ASSERT_EQ(m.take(is_done, out), StaticMerge::Take::kElement);
  EXPECT_EQ(out.id(), 54);
  EXPECT_EQ(m.lane_state().dump(), R"({"done_pieces":[],"piece_records":{"5":5}})");
  done.insert(5);
  ASSERT_EQ(m.take(is_done, out), StaticMerge::Take::kElement);
  EXPECT_EQ(out.id(), 20);
  EXPECT_EQ(m.lane_state().dump(), R"({"done_pieces":[5],"piece_records":{"2":1}})");
  done.insert(2);
  done.insert(7);
  ASSERT_EQ(m.take(is_done, out), StaticMerge::Take::kElement);
  EXPECT_EQ(out.id(), 73);
  EXPECT_EQ(m.take(is_done, out), StaticMerge::Take::kEnd);
  EXPECT_EQ(m.bytes(), 0u);
  // A restored position: pieces 5 done, 3 records of piece 2 returned.
  done = {5};
  m.start({5, 2, 7}, is_done, [](int64_t p) { return p == 2 ? int64_t{3} : 0; });
  EXPECT_EQ(m.lane_state().dump(), R"({"done_pieces":[5],"piece_records":{"2":3}})");
}

// (a) and (c): one worker, three, three with worker 0 killed at its 3rd frame (mid-
// epoch, mid-piece without the filter), and three with a stream of worker 1 cut: each
// consumer's sequence is its fixed one, and together they are the source's once each.
TEST_F(ServiceStatic, SameOrderWhateverTheWorkers) {
  for (const bool filter : {false, true}) {
    const std::string up = upstream(filter);
    std::vector<Sequence> one, three, killed, cut;
    run(up, 1, {}, one);
    check(up, one);
    run(up, 3, {}, three);
    EXPECT_EQ(three, one);
    EXPECT_EQ(run(up, 3, {.worker = 0, .point = "frame", .nth = 2}, killed), 1);
    EXPECT_EQ(killed, one);
    EXPECT_EQ(
        run(up, 3, {.worker = 1, .point = "frame", .nth = 1, .fault = Fault::kCutStream}, cut), 1);
    EXPECT_EQ(cut, one);
    if (HasFailure()) return;
  }
}

// The network drops under every worker's streams at once mid-epoch (the in-process
// transport severs them; the workers' sides go on into the void), the workers alive
// (2,400 records in 24 pieces of 100, each two frames, a millisecond a record):
// each consumer reopens its workers' streams, the waiting lanes are placed on them,
// and each consumer's sequence is its uninterrupted one.
TEST_F(ServiceStatic, StreamsCutByTheNetworkAreReopenedInTheSameOrder) {
  const std::string up = sleepy(2400, 1);
  std::vector<Sequence> plain, cut;
  run(up, 2, {}, plain);
  int severed = 0;
  const During sever = [&](std::vector<std::unique_ptr<Worker>>& workers) {
    await_frames(12);
    for (const auto& w : workers) severed += sever_in_process_streams(*transport_, w->address());
  };
  frames_ = 0;
  ::testing::internal::CaptureStderr();
  run(up, 2, {}, cut, nullptr, sever);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(severed, kConsumers * 2) << said;
  EXPECT_NE(said.find("stream reopened (stream 1 of epoch 0)"), std::string::npos) << said;
  EXPECT_EQ(cut, plain);
  check(up, cut);
}

// A worker that joins mid-epoch takes lanes at once: the worker reading them all has its
// streams released at the records kept and the lanes are dealt again over both, so the
// joiner sends frames of this epoch, and each consumer's sequence is its one-worker
// sequence (1,200 records in 12 pieces of 100, each two frames, 4 ms a record: the
// joiner comes after 4 of 24 frames).
TEST_F(ServiceStatic, AWorkerThatJoinsMidEpochTakesLanesInTheSameOrder) {
  const std::string up = sleepy(1200, 4);
  std::vector<Sequence> plain, joined;
  run(up, 1, {}, plain);
  std::atomic<int> joiner_frames{0};
  const During join = [&](std::vector<std::unique_ptr<Worker>>& workers) {
    await_frames(4);
    WorkerOptions o = loopback_worker(port_);
    o.fault = [&](const std::string& point, int64_t) {
      if (point == "frame") ++joiner_frames;
      return Fault::kNone;
    };
    workers.push_back(start_service_worker(o));
  };
  frames_ = 0;
  ::testing::internal::CaptureStderr();
  run(up, 1, {}, joined, nullptr, join);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(joiner_frames, 0) << said;
  EXPECT_NE(said.find("a worker joined mid-epoch: the "), std::string::npos) << said;
  EXPECT_NE(said.find("lanes not yet ended are dealt again over the 2 workers listed"),
            std::string::npos)
      << said;
  EXPECT_EQ(joined, plain);
  check(up, joined);
}

// (b): consumer 0 dropped three times (without a word to anyone) and resumed from the
// state it saved last: each life reads 100 + 150 * life elements, saves, and reads 40
// more that are lost with it; the last life reads the rest. What it kept up to each save,
// then the last life's, is its uninterrupted sequence; worker 1 is killed at its 4th
// frame meanwhile.
TEST_F(ServiceStatic, AResumedConsumerContinuesItsSequence) {
  const Consume resumed = [](const PipelineDef& def) {
    if (def.to_json()["source"]["consumer"] != 0) return drain(*def.build());
    std::vector<Example> kept;
    std::string state;
    for (int life = 0; life < 3; ++life) {
      auto p = def.build();
      if (!state.empty()) p->restore(state);
      for (int i = 0; i < 100 + 150 * life; ++i) kept.push_back(p->next().value());
      state = p->save();
      for (int i = 0; i < 40; ++i) EXPECT_TRUE(p->next().has_value());
    }
    auto p = def.build();
    p->restore(state);
    for (Example& e : drain(*p)) kept.push_back(std::move(e));
    return kept;
  };
  for (const bool filter : {false, true}) {
    const std::string up = upstream(filter);
    std::vector<Sequence> got;
    run(up, 3, {.worker = 1, .point = "frame", .nth = 3}, got, resumed);
    check(up, got);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace dataecho::service
