// The dispatcher's state machine (src/service/dispatcher_state.h): jobs, epochs of
// pieces pending, leased and done, leases that move only on their consumer's report,
// workers and their beats on a clock the test sets. Pure: no network, no files.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dataecho/core/error.h"
#include "service/dispatcher_state.h"

namespace dataecho::service {
namespace {

JobSpec spec(const std::string& name, int32_t lanes, int32_t consumers,
             const std::string& fingerprint = "3f2a0c11d2e4b5a6") {
  JobSpec s;
  s.set_name(name);
  s.set_upstream_json(R"({"source": {"kind": "range", "count": 100}})");
  s.set_fingerprint(fingerprint);
  s.set_lanes(lanes);
  s.set_consumers(consumers);
  return s;
}

// A state with job "train" (lanes, consumers), workers 1 and 2, and epoch 0 of `pieces`
// pieces dealt to lanes round robin (piece p in lane p % lanes).
struct Fixture {
  DispatcherState state;
  int64_t job = 0;

  Fixture(int32_t lanes, int32_t consumers, int pieces) {
    auto e = state.register_job(spec("train", lanes, consumers), R"({"plan": 1})");
    EXPECT_TRUE(e.has_value());
    state.apply(*e);
    job = state.find_job("train")->id;
    for (int64_t w : {1, 2}) state.apply(state.register_worker(w, "10.0.0." + std::to_string(w)));
    open(0, pieces);
  }
  void open(int64_t epoch, int pieces) {
    std::vector<int32_t> lanes;
    const int32_t k = state.job(job).spec.lanes();
    for (int p = 0; p < pieces; ++p) lanes.push_back(p % k);
    state.apply(state.open_epoch(job, epoch, lanes));
  }
  // Leases the consumer's next piece to `worker`, or nullopt.
  std::optional<Lease> lease(int32_t consumer, int64_t epoch = 0, int64_t worker = 1) {
    auto e = state.next_lease(job, consumer, epoch, worker);
    if (!e) return std::nullopt;
    state.apply(*e);
    return e->lease();
  }
  void done(const Lease& l) { state.apply(state.done(job, l.epoch(), l.piece(), l.lease())); }
  void release(const Lease& l, int64_t kept) {
    state.apply(state.release(job, l.epoch(), l.piece(), l.lease(), kept));
  }
};

TEST(DispatcherState, EveryPieceOfAnEpochIsLeasedOnce) {
  Fixture f(6, 1, 24);
  std::set<int64_t> leased, ids;
  while (auto l = f.lease(0)) {
    EXPECT_TRUE(leased.insert(l->piece()).second) << "piece " << l->piece() << " leased twice";
    EXPECT_TRUE(ids.insert(l->lease()).second) << "lease id " << l->lease() << " reused";
    EXPECT_EQ(l->from(), 0);
    EXPECT_EQ(l->lane(), l->piece() % 6);
  }
  EXPECT_EQ(leased.size(), 24u);
  EXPECT_FALSE(f.state.epoch_done(f.job, 0, 0));  // leased, not done
  EXPECT_EQ(f.state.job(f.job).epochs.at(0).pieces.size(), 24u);
}

TEST(DispatcherState, ConsumersGetOnlyTheirLanes) {
  Fixture f(6, 2, 24);
  for (int32_t consumer : {0, 1}) {
    int n = 0;
    while (auto l = f.lease(consumer)) {
      EXPECT_EQ(l->lane() % 2, consumer) << "piece " << l->piece();
      f.done(*l);
      ++n;
    }
    EXPECT_EQ(n, 12);
    EXPECT_TRUE(f.state.epoch_done(f.job, consumer, 0));
  }
}

TEST(DispatcherState, AReleasedPieceRestartsAtItsPositionAndFirst) {
  Fixture f(2, 1, 4);
  const Lease a = *f.lease(0);
  const Lease b = *f.lease(0);
  EXPECT_EQ(a.piece(), 0);
  EXPECT_EQ(b.piece(), 1);
  f.release(b, 700);  // the consumer kept 700 records of piece 1, then cut the stream
  const Lease again = *f.lease(0, 0, 2);
  EXPECT_EQ(again.piece(), 1) << "a released piece goes before the untouched ones";
  EXPECT_EQ(again.from(), 700);
  EXPECT_EQ(again.worker(), 2);
  EXPECT_GT(again.lease(), b.lease());
  // A count below the lease's start would lose the records between: refused.
  EXPECT_THROW(f.state.release(f.job, 0, 1, again.lease(), 699), Error);
}

TEST(DispatcherState, AStaleLeaseIsRefused) {
  Fixture f(2, 1, 2);
  const Lease first = *f.lease(0);
  f.release(first, 10);
  const Lease second = *f.lease(0);
  ASSERT_EQ(second.piece(), first.piece());
  try {
    f.state.done(f.job, 0, first.piece(), first.lease());
    FAIL() << "the old lease finished the piece";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lease " + std::to_string(first.lease())),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("piece " + std::to_string(first.piece())),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.state.release(f.job, 0, first.piece(), first.lease(), 20), Error);
  // An entry made by hand with the stale lease is refused by apply too (a journal replay).
  JournalEntry e;
  auto* d = e.mutable_done();
  d->set_job(f.job);
  d->mutable_pos()->set_piece(first.piece());
  d->mutable_pos()->set_lease(first.lease());
  EXPECT_THROW(f.state.apply(e), Error);
  f.done(second);
}

// A worker that stops beating is reported silent, but its leases stay: only the consumer,
// who knows how many records it kept, releases them.
TEST(DispatcherState, ASilentWorkersLeaseMovesOnlyOnItsConsumersReport) {
  Fixture f(2, 1, 2);
  f.state.beat(1, 1'000);
  f.state.beat(2, 1'000);
  const Lease l = *f.lease(0, 0, 1);
  f.state.beat(2, 9'000);
  EXPECT_EQ(f.state.silent_workers(9'000, 5'000), std::vector<int64_t>{1});
  EXPECT_TRUE(f.state.silent_workers(5'000, 5'000).empty());
  const Lease other = *f.lease(0, 0, 2);
  EXPECT_NE(other.piece(), l.piece());
  EXPECT_FALSE(f.lease(0, 0, 2).has_value()) << "the silent worker's piece was leased again";
  f.release(l, 5);
  const Lease moved = *f.lease(0, 0, 2);
  EXPECT_EQ(moved.piece(), l.piece());
  EXPECT_EQ(moved.from(), 5);
  EXPECT_THROW(f.state.beat(7, 1), Error);  // not a registered worker
}

TEST(DispatcherState, RewindSetsTheCheckpointsPositions) {
  Fixture f(2, 1, 4);
  std::vector<Lease> leases;
  while (auto l = f.lease(0)) leases.push_back(*l);
  f.done(leases[0]);
  f.done(leases[1]);
  f.open(1, 4);
  const Lease next_epoch = *f.lease(0, 1);
  // The checkpoint: piece 0 done, piece 2 at record 40; piece 1 (done since) and 3 not.
  std::vector<PiecePos> pos(2);
  pos[0].set_epoch(0);
  pos[0].set_piece(0);
  pos[0].set_done(true);
  pos[1].set_epoch(0);
  pos[1].set_piece(2);
  pos[1].set_records(40);
  f.state.apply(f.state.rewind(f.job, 0, 1, 0, pos));
  const auto& pieces = f.state.job(f.job).epochs.at(0).pieces;
  EXPECT_EQ(pieces[0].status, PieceStatus::kDone);
  EXPECT_EQ(pieces[1].status, PieceStatus::kPending);
  EXPECT_EQ(pieces[1].from, 0);
  EXPECT_EQ(pieces[2].status, PieceStatus::kPending);
  EXPECT_EQ(pieces[2].from, 40);
  EXPECT_EQ(pieces[3].status, PieceStatus::kPending);
  // The later epoch's leases are void too.
  EXPECT_EQ(f.state.job(f.job).epochs.at(1).pieces[next_epoch.piece()].status,
            PieceStatus::kPending);
  EXPECT_THROW(f.state.done(f.job, 0, leases[2].piece(), leases[2].lease()), Error);
  // An older incarnation's rewind is refused.
  EXPECT_THROW(f.state.rewind(f.job, 0, 1, 0, pos), Error);
  EXPECT_EQ(f.lease(0)->piece(), 2);  // the released (rewound) positions first
}

// A closed stream stays closed in its epoch until the consumer's rewind, and survives a
// snapshot; a lease after the stream's previous one is found (a lost reply's).
TEST(DispatcherState, AClosedStreamStaysClosedUntilTheConsumersRewind) {
  Fixture f(2, 2, 4);
  const Lease first = *f.lease(0, 0, 1);
  EXPECT_EQ(f.state.leased_after(f.job, 0, 0, 1, 0), first.piece());
  EXPECT_FALSE(f.state.leased_after(f.job, 0, 0, 1, first.lease()).has_value());
  EXPECT_FALSE(f.state.leased_after(f.job, 0, 0, 2, 0).has_value());
  EXPECT_FALSE(f.state.leased_after(f.job, 0, 1, 1, 0).has_value());
  f.state.apply(f.state.close_stream(f.job, 0, 0, 1));
  EXPECT_TRUE(f.state.closed(f.job, 0, 0, 1));
  EXPECT_FALSE(f.state.closed(f.job, 0, 1, 1));
  EXPECT_FALSE(f.state.closed(f.job, 1, 0, 1));  // an epoch not open
  DispatcherState copy;
  copy.apply(f.state.snapshot());
  EXPECT_EQ(copy.describe(), f.state.describe());
  EXPECT_TRUE(copy.closed(f.job, 0, 0, 1));
  f.state.apply(f.state.rewind(f.job, 0, 1, 0, {}));
  EXPECT_FALSE(f.state.closed(f.job, 0, 0, 1));
  EXPECT_THROW(f.state.close_stream(f.job, 3, 0, 1), Error);  // no epoch 3
  EXPECT_THROW(f.state.close_stream(f.job, 0, 0, 9), Error);  // no worker 9
}

// A consumer reopens a stream it cut as the next number: closing stream 1 of a worker
// closes it and stream 0, not stream 2; an older close after it (a retried release)
// does not open stream 1 again; the number survives a snapshot.
TEST(DispatcherState, AReopenedStreamIsOpenUntilItIsClosed) {
  Fixture f(2, 2, 4);
  f.state.apply(f.state.close_stream(f.job, 0, 0, 1, 0));
  EXPECT_TRUE(f.state.closed(f.job, 0, 0, 1, 0));
  EXPECT_FALSE(f.state.closed(f.job, 0, 0, 1, 1));
  f.state.apply(f.state.close_stream(f.job, 0, 0, 1, 1));
  f.state.apply(f.state.close_stream(f.job, 0, 0, 1, 0));
  EXPECT_TRUE(f.state.closed(f.job, 0, 0, 1, 0));
  EXPECT_TRUE(f.state.closed(f.job, 0, 0, 1, 1));
  EXPECT_FALSE(f.state.closed(f.job, 0, 0, 1, 2));
  EXPECT_FALSE(f.state.closed(f.job, 0, 0, 2, 0));
  DispatcherState copy;
  copy.apply(f.state.snapshot());
  EXPECT_EQ(copy.describe(), f.state.describe());
  EXPECT_TRUE(copy.closed(f.job, 0, 0, 1, 1));
  EXPECT_FALSE(copy.closed(f.job, 0, 0, 1, 2));
}

TEST(DispatcherState, AJobNameWithAnotherFingerprintIsRefused) {
  DispatcherState state;
  state.apply(*state.register_job(spec("train", 2, 1, "3f2a0c11d2e4b5a6"), "{}"));
  EXPECT_FALSE(state.register_job(spec("train", 2, 1, "3f2a0c11d2e4b5a6"), "{}").has_value())
      << "the same job again is the existing one";
  try {
    state.register_job(spec("train", 2, 1, "9c01aa77e0f3d2c1"), "{}");
    FAIL() << "another upstream under the same name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "job 'train' exists with another upstream (3f2a0c11d2e4... vs 9c01aa77e0f3...)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("dataecho service stop-job"), std::string::npos);
  }
  state.apply(state.stop_job(state.find_job("train")->id));
  EXPECT_TRUE(state.register_job(spec("train", 2, 1, "9c01aa77e0f3d2c1"), "{}").has_value());
}

TEST(DispatcherState, LanesMustDivideByConsumers) {
  DispatcherState state;
  try {
    state.register_job(spec("train", 12, 5), "{}");
    FAIL() << "12 lanes over 5 consumers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "12 lanes do not split over 5 consumers: use 1, 2, 3, 4, 6 or 12"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(state.register_job(spec("train", 12, 4), "{}").has_value());
}

TEST(DispatcherState, BadEntriesAreRefusedNamingWhatIsWrong) {
  Fixture f(2, 1, 2);
  EXPECT_THROW(f.state.next_lease(f.job + 1, 0, 0, 1), Error);  // no such job
  EXPECT_THROW(f.state.next_lease(f.job, 1, 0, 1), Error);      // consumer 1 of 1
  EXPECT_THROW(f.state.next_lease(f.job, 0, 5, 1), Error);      // epoch not open
  EXPECT_THROW(f.state.next_lease(f.job, 0, 0, 9), Error);      // no worker 9
  EXPECT_THROW(f.state.open_epoch(f.job, 0, {0, 1}), Error);    // open already
  EXPECT_THROW(f.state.open_epoch(f.job, 1, {0, 2}), Error);    // lane 2 of 2
  JournalEntry empty;
  EXPECT_THROW(f.state.apply(empty), Error);
}

// A worker's rate: the count's growth over the last interval of a second or more, the
// time given by the caller; a count that starts again (a restarted worker) starts over.
TEST(RateMeter, MeasuresTheLastIntervalOfTheClockGiven) {
  RateMeter r(1000);
  EXPECT_EQ(r.per_second(), 0.0);
  r.add(0, 10'000);
  r.add(400, 10'500);  // within the interval: no rate yet
  EXPECT_EQ(r.per_second(), 0.0);
  r.add(1'000, 11'000);
  EXPECT_DOUBLE_EQ(r.per_second(), 1'000.0);
  r.add(1'500, 13'000);  // 500 over 2 s
  EXPECT_DOUBLE_EQ(r.per_second(), 250.0);
  r.add(1'500, 14'000);
  EXPECT_DOUBLE_EQ(r.per_second(), 0.0);
  r.add(10, 14'100);  // restarted: a new first sample, the last rate kept
  r.add(210, 15'100);
  EXPECT_DOUBLE_EQ(r.per_second(), 200.0);
}

}  // namespace
}  // namespace dataecho::service
