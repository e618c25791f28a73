// Sharding "dynamic" under worker failures: a real dispatcher, three real workers and two
// consumers (`service` sources of 6 lanes) over the in-process transport, the workers'
// fault hook killing a worker or cutting one of its streams at a chosen point. Whatever
// fails, the epoch's (id, echo) multiset over both consumers is the source's, each once,
// and each consumer's ids are exactly those of its lanes' pieces.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "dataecho/formats/tfrecord.h"
#include "dataecho/service/service.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/service.h"
#include "service/loopback_worker.h"
#include "service/transport.h"
#include "test_util.h"

namespace dataecho::service {
namespace {

using dataecho::testing::drain;
using dataecho::testing::temp_dir;

constexpr int kLanes = 6;
constexpr int kConsumers = 2;
constexpr int kWorkers = 3;
#ifdef __SANITIZE_THREAD__
constexpr uint32_t kSchedules = 16;  // about 1 s each under TSan
#else
constexpr uint32_t kSchedules = 60;
#endif

// A fault: on worker `worker`, at the `nth` (from 0) call of the hook at `point`.
struct FaultAt {
  int worker = 0;
  std::string point;
  int nth = 0;
  Fault fault = Fault::kKill;
};

using Pairs = std::vector<std::pair<int64_t, int32_t>>;  // (id, echo), sorted

Pairs pairs_of(const std::vector<Example>& elements) {
  Pairs p;
  for (const Example& e : elements) p.emplace_back(e.id(), e.echo());
  std::sort(p.begin(), p.end());
  return p;
}

// The range source (6,000 records: 24 pieces of 250, of which the filter keeps about
// 83, two frames) or 4 TFRecord files of 300, 0, 5,000 and 900 records read raw (24
// pieces of about 258, five frames).
// RandomFaults' sources are a fifth of that (one frame a piece).
std::string range_upstream(int64_t count = 6000) {
  return R"({"seed": 5, "source": {"kind": "range", "count": )" + std::to_string(count) +
         R"(}, "stages": [{"op": "filter", "fn": "id_mod", "args": {"mod": 3}}]})";
}

std::string tfrecord_upstream(int64_t scale = 5) {
  const std::string dir = temp_dir();
  nlohmann::json uris = nlohmann::json::array();
  const int64_t counts[] = {60 * scale, 0, 1000 * scale, 180 * scale};
  for (int s = 0; s < 4; ++s) {
    uris.push_back(dir + "/part-" + std::to_string(s) + ".tfrecord");
    TfRecordWriter w(uris.back().get<std::string>());
    for (int64_t r = 0; r < counts[s]; ++r) w.write("record " + std::to_string(s * 1000 + r));
    w.close();
  }
  return nlohmann::json{{"seed", 5},
                        {"source", {{"kind", "tfrecord"}, {"uri", uris}, {"raw", true}}}}
      .dump();
}

class ServiceExactlyOnce : public ::testing::Test {
 protected:
  void SetUp() override { set_default_transport(transport_); }
  void TearDown() override { set_default_transport(nullptr); }

  // Runs one epoch over the upstream with the faults; checks exactly once. Returns how
  // many of the faults happened. `during` (may be null) runs on this thread while the
  // consumers read, given the dispatcher (which it may replace) and its options.
  // `consume` (may be null: build and drain) reads consumer r's epoch from its spec.
  using During = std::function<void(std::unique_ptr<Dispatcher>&, DispatcherOptions&)>;
  using Consume = std::function<std::vector<Example>(int r, const std::string& spec)>;
  int run_epoch(const std::string& upstream, const std::vector<FaultAt>& faults,
                const During& during = nullptr, const std::string& journal = "",
                const Consume& consume = nullptr) {
    int fired = 0;
    DispatcherOptions d;
    d.bind = "127.0.0.1";
    d.journal_dir = journal;
    auto dispatcher = start_service_dispatcher(d);
    d.port = dispatcher->port();
    std::mutex mu;
    std::map<std::pair<int, std::string>, int> calls;
    std::vector<std::unique_ptr<Worker>> workers;
    for (int w = 0; w < kWorkers; ++w) {
      WorkerOptions o = loopback_worker(dispatcher->port());
      o.fault = [&, w](const std::string& point, int64_t) {
        std::lock_guard lock(mu);
        if (point == "frame") ++frames_;
        const int n = calls[{w, point}]++;
        for (const FaultAt& f : faults)
          if (f.worker == w && f.point == point && f.nth == n) {
            ++fired;
            return f.fault;
          }
        return Fault::kNone;
      };
      workers.push_back(start_service_worker(o));
    }
    workers_ = &workers;
    std::vector<std::vector<Example>> got(kConsumers);
    std::vector<std::string> errors(kConsumers);
    std::vector<std::thread> consumers;
    for (int r = 0; r < kConsumers; ++r)
      consumers.emplace_back([&, r] {
        try {
          const std::string text = spec(dispatcher->port(), upstream, r);
          if (consume) {
            got[r] = consume(r, text);
            return;
          }
          auto p = PipelineDef::from_json(nlohmann::json::parse(text)).build();
          got[r] = drain(*p);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    if (during) during(dispatcher, d);
    for (auto& t : consumers) t.join();
    workers_ = nullptr;
    workers.clear();
    for (int r = 0; r < kConsumers; ++r) EXPECT_EQ(errors[r], "") << "consumer " << r;
    Pairs all;
    for (int r = 0; r < kConsumers; ++r) {
      const Pairs mine = pairs_of(got[r]);
      EXPECT_EQ(mine, lanes_pairs(upstream, r)) << "consumer " << r;
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    auto whole = PipelineDef::from_json(nlohmann::json::parse(upstream)).build();
    EXPECT_EQ(all, pairs_of(drain(*whole)));
    return fired;
  }

  static std::string spec(int port, const std::string& upstream, int consumer) {
    return nlohmann::json{{"source",
                           {{"kind", "service"},
                            {"dispatcher", "127.0.0.1:" + std::to_string(port)},
                            {"job", "train"},
                            {"sharding", "dynamic"},
                            {"lanes", kLanes},
                            {"consumers", kConsumers},
                            {"consumer", consumer},
                            {"connect_timeout_s", 5},
                            {"pipeline", nlohmann::json::parse(upstream)}}}}
        .dump();
  }

  std::atomic<int> frames_{0};  // frames the workers have sent (the fault hook's count)
  std::shared_ptr<Transport> transport_ = in_process_transport();
  std::vector<std::unique_ptr<Worker>>* workers_ = nullptr;  // run_epoch's, while it runs

  // The (id, echo) pairs of consumer r's lanes' pieces in epoch 0, read piece by piece.
  static Pairs lanes_pairs(const std::string& upstream, int r) {
    const auto plan = service_plan_builder()(upstream, kLanes);
    const std::vector<int32_t> lanes = plan->lanes_of(0);
    std::vector<Example> all;
    for (size_t p = 0; p < plan->pieces.size(); ++p) {
      if (lanes[p] % kConsumers != r) continue;
      auto pipeline =
          service_piece_builder()(upstream, 0, 0, [&](std::shared_ptr<const Dataset> s) {
            return make_piece_source(std::move(s), plan->pieces[p], 0, nullptr);
          });
      for (Example& e : drain(*pipeline)) all.push_back(std::move(e));
    }
    return pairs_of(all);
  }
};

TEST_F(ServiceExactlyOnce, NoFaults) {
  run_epoch(range_upstream(), {});
  run_epoch(tfrecord_upstream(), {});
}

class ServiceExactlyOnceKilled : public ServiceExactlyOnce,
                                 public ::testing::WithParamInterface<std::string> {};

// Worker 0 is killed at its second piece's lease (before its first frame), after the
// first frame of its second piece (mid-piece: every piece has two frames or more), with
// every element of its second piece sent but not its PIECE_DONE (so the consumer has not
// reported it done), or right after it leased a piece ahead (holding two leases, the
// second with nothing sent).
TEST_P(ServiceExactlyOnceKilled, WorkerKilled) {
  const std::map<std::string, FaultAt> at = {
      {"before_first", {.worker = 0, .point = "lease", .nth = 1}},
      {"mid_piece", {.worker = 0, .point = "frame", .nth = 2}},
      {"after_done_before_ack", {.worker = 0, .point = "done", .nth = 1}},
      {"holding_a_lease_ahead", {.worker = 0, .point = "ahead", .nth = 0}}};
  EXPECT_EQ(run_epoch(range_upstream(), {at.at(GetParam())}), 1);
  EXPECT_EQ(run_epoch(tfrecord_upstream(), {at.at(GetParam())}), 1);
}

INSTANTIATE_TEST_SUITE_P(, ServiceExactlyOnceKilled,
                         ::testing::Values("before_first", "mid_piece", "after_done_before_ack",
                                           "holding_a_lease_ahead"),
                         [](const auto& info) { return info.param; });

// The dispatcher stopped mid-epoch and started again on its journal 0.3 s later, twice
// (after the workers' 4th and 12th frames), and worker 2 killed at its 5th frame: workers
// ask for their next pieces and consumers report and release again until it answers, the
// replayed leases, releases and done pieces stand, and the epoch is the source's once each.
TEST_F(ServiceExactlyOnce, DispatcherRestartedOnItsJournal) {
  auto restart_at = [&](std::vector<int> at) -> During {
    return [this, at](std::unique_ptr<Dispatcher>& dispatcher, DispatcherOptions& d) {
      for (int frames : at) {
        for (int ms = 0; frames_ < frames; ++ms) {
          ASSERT_LT(ms, 30'000) << "the workers sent " << frames_ << " frames";
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        dispatcher->stop();
        dispatcher.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        dispatcher = start_service_dispatcher(d);
        EXPECT_EQ(dispatcher->journal_warnings(), std::vector<std::string>());
      }
    };
  };
  for (const std::string& upstream : {range_upstream(), tfrecord_upstream()}) {
    frames_ = 0;
    run_epoch(upstream, {{.worker = 2, .point = "frame", .nth = 4}}, restart_at({4, 12}),
              temp_dir() + "/journal");
  }
}

// Consumer 0 "killed" three times (its pipeline dropped without a word to anyone) and
// resumed from the state it saved last: each life reads 40 + 30 * life elements, saves,
// reads 25 more that are lost with it; the last life reads the rest. Worker 1 is killed
// at its 3rd frame. What the consumer kept up to each save, then the last life's, is its
// lanes' once each.
TEST_F(ServiceExactlyOnce, ConsumerResumedFromItsState) {
  const Consume resumed = [](int r, const std::string& text) {
    const PipelineDef def = PipelineDef::from_json(nlohmann::json::parse(text));
    if (r != 0) return drain(*def.build());
    std::vector<Example> kept;
    std::string state;
    for (int life = 0; life < 3; ++life) {
      auto p = def.build();
      if (!state.empty()) p->restore(state);
      for (int i = 0; i < 40 + 30 * life; ++i) kept.push_back(*p->next());
      state = p->save();
      for (int i = 0; i < 25; ++i) EXPECT_TRUE(p->next().has_value());
    }
    auto p = def.build();
    p->restore(state);
    for (Example& e : drain(*p)) kept.push_back(std::move(e));
    return kept;
  };
  for (const std::string& upstream : {range_upstream(), tfrecord_upstream()})
    run_epoch(upstream, {{.worker = 1, .point = "frame", .nth = 2}}, nullptr, "", resumed);
}

// A saved state resumes only the same consumer of as many consumers, of the same job.
TEST_F(ServiceExactlyOnce, AStateResumesOnlyItsOwnConsumer) {
  DispatcherOptions d;
  d.bind = "127.0.0.1";
  auto dispatcher = start_service_dispatcher(d);
  WorkerOptions o;
  o.dispatcher = "127.0.0.1:" + std::to_string(dispatcher->port());
  o.bind = "127.0.0.1";
  o.beat_ms = 100;
  auto worker = start_service_worker(o);
  const std::string upstream = range_upstream(1200);
  auto p =
      PipelineDef::from_json(nlohmann::json::parse(spec(dispatcher->port(), upstream, 0))).build();
  ASSERT_TRUE(p->next().has_value());
  const std::string state = p->save();
  auto other =
      PipelineDef::from_json(nlohmann::json::parse(spec(dispatcher->port(), upstream, 1))).build();
  try {
    other->restore(state);
    FAIL() << "consumer 1 restored consumer 0's state";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is consumer 0 of 2, this source consumer 1 of 2"),
              std::string::npos)
        << e.what();
  }
}

// The epoch's pieces leased now (the status's count).
int64_t leased_now(int port) {
  const auto s = service_status("127.0.0.1:" + std::to_string(port), "", 5);
  for (const auto& j : s["jobs"])
    for (const auto& e : j["epochs"]) return e["leased"].get<int64_t>();
  return 0;
}

// Lease ahead: one worker and one consumer of 3 lanes (12 pieces of 1,000 records, 16
// frames each): the worker leases the next piece at 90% of the current one, one frame
// before its last, so the stream then holds two leases, and never more; each id once.
TEST_F(ServiceExactlyOnce, AStreamLeasesTheNextPieceAheadAndHoldsAtMostTwo) {
  DispatcherOptions d;
  d.bind = "127.0.0.1";
  auto dispatcher = start_service_dispatcher(d);
  WorkerOptions o = loopback_worker(dispatcher->port());
  std::mutex mu;
  std::map<std::string, int64_t> most;  // the most leases held at each hook point
  int64_t aheads = 0;
  o.fault = [&](const std::string& point, int64_t) {
    const int64_t leased = leased_now(dispatcher->port());
    std::lock_guard lock(mu);
    most[point] = std::max(most[point], leased);
    aheads += point == "ahead";
    return Fault::kNone;
  };
  auto worker = start_service_worker(o);
  const std::string upstream = R"({"seed": 5, "source": {"kind": "range", "count": 12000}})";
  nlohmann::json text = nlohmann::json::parse(spec(dispatcher->port(), upstream, 0));
  text["source"]["lanes"] = 3;
  text["source"]["consumers"] = 1;
  auto p = PipelineDef::from_json(text).build();
  EXPECT_EQ(pairs_of(drain(*p)),
            pairs_of(drain(*PipelineDef::from_json(nlohmann::json::parse(upstream)).build())));
  std::lock_guard lock(mu);
  EXPECT_EQ(aheads, 11);  // every piece but the last leases the next ahead
  EXPECT_EQ(most["ahead"], 2);
  EXPECT_EQ(most["frame"], 2);
  EXPECT_EQ(most["done"], 2);
  EXPECT_LE(most["lease"], 2);
}

// Seeded schedules of up to two faults (worker kills and stream cuts, at random points
// and calls), so that each consumer keeps a stream to a live worker; 60 (16 under TSan).
TEST_F(ServiceExactlyOnce, RandomFaults) {
  const std::string range = range_upstream(1200), tfrecord = tfrecord_upstream(1);
  const char* points[] = {"lease", "frame", "done"};
  int fired = 0;
  for (uint32_t seed = 0; seed < kSchedules; ++seed) {
    std::mt19937 rng(seed);
    std::vector<FaultAt> faults;
    const int n = static_cast<int>(rng() % 3);
    std::vector<int> hit = {0, 1, 2};
    std::shuffle(hit.begin(), hit.end(), rng);
    for (int i = 0; i < n; ++i)
      faults.push_back({.worker = hit[static_cast<size_t>(i)],
                        .point = points[rng() % 3],
                        .nth = static_cast<int>(rng() % 6),
                        .fault = rng() % 2 ? Fault::kKill : Fault::kCutStream});
    SCOPED_TRACE("seed " + std::to_string(seed));
    fired += run_epoch(seed % 2 ? range : tfrecord, faults);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
  EXPECT_GE(fired, kSchedules / 2);  // most faults happen (a call past the epoch's last does not)
}

// The network drops under every worker's streams at once mid-epoch (the in-process
// transport severs them: each consumer's stream ends with UNAVAILABLE, while the
// worker's side goes on writing into the void, its cancel never arriving), the workers
// alive and registered: each consumer reopens a stream to each worker, the old streams
// (closed at the dispatcher by the release) deliver nothing, and the epoch is the
// source's once each.
TEST_F(ServiceExactlyOnce, StreamsCutByTheNetworkAreReopened) {
  const std::string upstream =
      R"({"seed": 5, "source": {"kind": "range", "count": 1500},
          "stages": [{"op": "map", "fn": "sleep", "args": {"ms": 1}}]})";
  int severed = 0;
  const During sever = [&](std::unique_ptr<Dispatcher>&, DispatcherOptions&) {
    for (int ms = 0; frames_ < 6; ++ms) {
      ASSERT_LT(ms, 30'000) << "the workers sent " << frames_ << " frames";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (const auto& w : *workers_) severed += sever_in_process_streams(*transport_, w->address());
  };
  ::testing::internal::CaptureStderr();
  run_epoch(upstream, {}, sever);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(severed, kConsumers * 2) << said;  // both consumers' streams, of two workers or more
  EXPECT_NE(said.find("the connection was severed (test): stream cut"), std::string::npos) << said;
  EXPECT_NE(said.find("stream reopened (stream 1 of epoch 0)"), std::string::npos) << said;
}

// Workers really gone (stopped) mid-epoch: the consumer waits connect_timeout_s (1 s)
// since its last stream ended for one to come back, then fails naming them; not at once,
// and not never.
TEST_F(ServiceExactlyOnce, WorkersGoneFailTheEpochAfterTheTimeout) {
  DispatcherOptions d;
  d.bind = "127.0.0.1";
  auto dispatcher = start_service_dispatcher(d);
  auto a = start_service_worker(loopback_worker(dispatcher->port()));
  auto b = start_service_worker(loopback_worker(dispatcher->port()));
  const std::string upstream =
      R"({"seed": 5, "source": {"kind": "range", "count": 3000},
          "stages": [{"op": "map", "fn": "sleep", "args": {"ms": 1}}]})";
  nlohmann::json text = nlohmann::json::parse(spec(dispatcher->port(), upstream, 0));
  text["source"]["consumers"] = 1;
  text["source"]["buffer_mb"] = 1;
  text["source"]["connect_timeout_s"] = 1;
  auto p = PipelineDef::from_json(text).build();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(p->next().has_value());
  using Clock = std::chrono::steady_clock;
  const auto stopping = Clock::now();
  a->stop();
  b->stop();
  const auto stopped = Clock::now();
  ::testing::internal::CaptureStderr();
  std::string error;
  try {
    while (p->next()) {
    }
  } catch (const Error& e) {
    error = e.what();
  }
  ::testing::internal::GetCapturedStderr();
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  EXPECT_GE(since(stopping), 1.0) << error;
  EXPECT_LT(since(stopped), 4.0) << error;
  EXPECT_NE(error.find("every worker's stream of epoch 0 ended before its pieces were done"),
            std::string::npos)
      << error;
  for (const auto& w : {a.get(), b.get()})
    EXPECT_NE(error.find("worker w" + std::to_string(w->number()) + " (" + w->address() + ")"),
              std::string::npos)
        << error;
}

// The status's entry of worker `number`.
nlohmann::json worker_status(int port, int64_t number) {
  const auto s = service_status("127.0.0.1:" + std::to_string(port), "", 5);
  for (const auto& w : s["workers"])
    if (w["worker"] == number) return w;
  return nullptr;
}

// A worker that joins mid-epoch takes pending pieces of it; a worker that drains (as its
// process does on SIGTERM) finishes the piece it holds, takes no new one, and its
// stream ends: its consumer reads on from the other. One consumer of 3 lanes (12
// pieces of 100), the upstream sleeping 1 ms an element; worker B starts after a
// quarter of the epoch is read, worker A drains once B has a piece (the status says so;
// draining the only worker whose stream is open would end the epoch short). Each id
// once; A, stopped, is "left" in the status.
TEST_F(ServiceExactlyOnce, AWorkerJoinsAndOneLeavesMidEpoch) {
  DispatcherOptions d;
  d.bind = "127.0.0.1";
  auto dispatcher = start_service_dispatcher(d);
  const WorkerOptions o = loopback_worker(dispatcher->port());
  auto a = start_service_worker(o);
  const std::string upstream =
      R"({"seed": 5, "source": {"kind": "range", "count": 1200},
          "stages": [{"op": "map", "fn": "sleep", "args": {"ms": 1}}]})";
  nlohmann::json text = nlohmann::json::parse(spec(dispatcher->port(), upstream, 0));
  text["source"]["lanes"] = 3;
  text["source"]["consumers"] = 1;
  text["source"]["buffer_mb"] = 1;
  auto p = PipelineDef::from_json(text).build();
  std::vector<Example> got;
  std::unique_ptr<Worker> b;
  while (auto e = p->next()) {
    got.push_back(std::move(*e));
    if (got.size() == 300) b = start_service_worker(o);
    if (b && !a->draining() && got.size() % 20 == 0 &&
        worker_status(dispatcher->port(), b->number())["pieces"].get<int64_t>() > 0)
      a->drain();
  }
  EXPECT_EQ(pairs_of(got),
            pairs_of(drain(*PipelineDef::from_json(nlohmann::json::parse(upstream)).build())));
  ASSERT_TRUE(b);
  EXPECT_TRUE(a->draining());
  EXPECT_EQ(a->open_streams(), 0);
  const int64_t number = a->number();
  a->stop();
  EXPECT_EQ(worker_status(dispatcher->port(), number)["state"], "left");
  auto joined = worker_status(dispatcher->port(), b->number());
  EXPECT_GT(joined["pieces"].get<int64_t>(), 0) << joined.dump();
  EXPECT_EQ(joined["state"], "alive");
}

// `dataecho service stop-worker`'s call: the worker named (by number or address) learns
// by its next beat that it is to leave, and the status says "leaving"; an unknown worker
// is refused naming those there are.
TEST_F(ServiceExactlyOnce, StopWorkerTellsTheWorkerToLeave) {
  DispatcherOptions d;
  d.bind = "127.0.0.1";
  auto dispatcher = start_service_dispatcher(d);
  const std::string address = "127.0.0.1:" + std::to_string(dispatcher->port());
  WorkerOptions o;
  o.dispatcher = address;
  o.bind = "127.0.0.1";
  o.beat_ms = 100;
  auto w1 = start_service_worker(o);
  auto w2 = start_service_worker(o);
  const StoppedWorker stopped = stop_worker(address, w2->address(), "", 5);
  EXPECT_EQ(stopped.worker, w2->number());
  EXPECT_EQ(worker_status(dispatcher->port(), w2->number())["state"], "leaving");
  for (int ms = 0; !w2->draining(); ms += 10) {
    ASSERT_LT(ms, 5'000) << "the worker did not hear it is to leave";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(w1->draining());
  EXPECT_EQ(stop_worker(address, "w1", "", 5).worker, w1->number());
  try {
    stop_worker(address, "w9", "", 5);
    FAIL() << "w9 was stopped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot stop worker 'w9': no worker 'w9' (workers: w1 " +
                                         w1->address()),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dataecho::service
