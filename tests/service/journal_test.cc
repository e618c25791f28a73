// The dispatcher's journal (src/service/journal.h): entries appended with TFRecord's
// framing and synced, replayed after a restart into the same state; a torn last record
// is dropped with a warning, a damaged one before the end refused by file and offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "dataecho/core/error.h"
#include "service/journal.h"

namespace dataecho::service {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("dataecho_journal_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

JobSpec job_spec(int32_t lanes, int32_t consumers) {
  JobSpec s;
  s.set_name("train");
  s.set_fingerprint("3f2a0c11d2e4b5a6");
  s.set_lanes(lanes);
  s.set_consumers(consumers);
  return s;
}

// How many entries of each kind record() wrote (the random sequences cover every kind).
std::map<JournalEntry::EntryCase, int> recorded;

// Applies `e` to the state and journals it first, as the dispatcher does.
void record(Journal& journal, DispatcherState& state, const JournalEntry& e) {
  journal.append(e);
  state.apply(e);
  ++recorded[e.entry_case()];
}

// `steps` random valid operations of a dispatcher with 2 consumers over 4 lanes: workers
// register, epochs open, pieces are leased, done, released at a count, rewound, streams
// closed.
void random_operations(Journal& journal, DispatcherState& state, std::mt19937_64& rng, int steps) {
  if (state.find_job("train") == nullptr) {
    record(journal, state, *state.register_job(job_spec(4, 2), R"({"plan": "x"})"));
    record(journal, state, state.register_worker(1, "10.0.0.1:41071"));
    record(journal, state, state.register_worker(2, "10.0.0.2:41071"));
  }
  const int64_t job = state.find_job("train")->id;
  std::vector<Lease> live;
  for (int step = 0; step < steps; ++step) {
    const auto& epochs = state.job(job).epochs;
    const int64_t epoch = epochs.empty() ? -1 : epochs.rbegin()->first;
    const int32_t consumer = static_cast<int32_t>(rng() % 2);
    switch (rng() % 7) {
      case 0: {  // a new epoch of 8 to 15 pieces
        std::vector<int32_t> lanes;
        for (uint64_t p = 0, n = 8 + rng() % 8; p < n; ++p)
          lanes.push_back(static_cast<int32_t>(rng() % 4));
        record(journal, state, state.open_epoch(job, epoch + 1, lanes));
        break;
      }
      case 1:
        if (epoch >= 0)
          if (auto e =
                  state.next_lease(job, consumer, epoch, 1 + static_cast<int64_t>(rng() % 2))) {
            record(journal, state, *e);
            live.push_back(e->lease());
          }
        break;
      case 2:
        record(journal, state,
               state.register_worker(2, "10.0.0.2:" + std::to_string(rng() % 1000)));
        break;
      case 3:
      case 4:
        if (!live.empty()) {
          const Lease l = live[rng() % live.size()];
          std::erase_if(live, [&](const Lease& x) { return x.lease() == l.lease(); });
          const auto& piece = state.job(job).epochs.at(l.epoch()).pieces.at(l.piece());
          if (piece.status != PieceStatus::kLeased || piece.lease != l.lease()) break;  // rewound
          if (rng() % 2)
            record(journal, state, state.done(job, l.epoch(), l.piece(), l.lease()));
          else
            record(journal, state,
                   state.release(job, l.epoch(), l.piece(), l.lease(), l.from() + rng() % 50));
        }
        break;
      case 5:
        if (epoch >= 0 && rng() % 4 == 0) {
          const auto& pieces = state.job(job).epochs.at(epoch).pieces;
          int64_t piece = 0;  // the consumer's first
          while (piece < static_cast<int64_t>(pieces.size()) &&
                 pieces[static_cast<size_t>(piece)].lane % 2 != consumer)
            ++piece;
          if (piece == static_cast<int64_t>(pieces.size())) break;
          PiecePos pos;
          pos.set_epoch(epoch);
          pos.set_piece(piece);
          pos.set_records(static_cast<int64_t>(rng() % 20));
          const int64_t incarnation = state.job(job).incarnations.at(consumer) + 1;
          record(journal, state, state.rewind(job, consumer, incarnation, epoch, {pos}));
        }
        break;
      case 6:  // a consumer cuts its stream from a worker
        if (epoch >= 0)
          record(journal, state,
                 state.close_stream(job, epoch, consumer, 1 + static_cast<int64_t>(rng() % 2)));
        break;
    }
  }
}

DispatcherState replayed(const fs::path& dir, std::vector<std::string>* warnings = nullptr) {
  DispatcherState state;
  Journal journal(dir.string(), state, warnings);
  return state;
}

TEST(Journal, ReplayGivesTheSameState) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    TempDir dir;
    std::mt19937_64 rng(seed);
    DispatcherState live;
    {
      Journal journal(dir.path.string(), live);
      random_operations(journal, live, rng, 40);
    }
    EXPECT_EQ(replayed(dir.path).describe(), live.describe()) << "seed " << seed;
    // A restart: the state replayed, then more operations into a second file.
    {
      DispatcherState again;
      Journal journal(dir.path.string(), again);
      ASSERT_EQ(again.describe(), live.describe());
      EXPECT_EQ(fs::path(journal.path()).filename(), "journal-000002.log");
      random_operations(journal, again, rng, 40);
      live = again;
    }
    EXPECT_EQ(replayed(dir.path).describe(), live.describe()) << "seed " << seed;
  }
  for (auto kind : {JournalEntry::kRegisterJob, JournalEntry::kRegisterWorker,
                    JournalEntry::kOpenEpoch, JournalEntry::kLease, JournalEntry::kRelease,
                    JournalEntry::kDone, JournalEntry::kRewind, JournalEntry::kCloseStream})
    EXPECT_GT(recorded[kind], 0) << "no entry of kind " << kind;
}

// The journal of `n` register_worker entries; returns the byte offset of each record.
std::vector<uint64_t> write_workers(const fs::path& dir, int n) {
  DispatcherState state;
  Journal journal(dir.string(), state);
  std::vector<uint64_t> offsets;
  for (int w = 1; w <= n; ++w) {
    offsets.push_back(fs::exists(journal.path()) ? fs::file_size(journal.path()) : 0);
    record(journal, state, state.register_worker(w, "10.0.0." + std::to_string(w) + ":1"));
  }
  return offsets;
}

TEST(Journal, ATornTailIsIgnored) {
  TempDir dir;
  const auto offsets = write_workers(dir.path, 5);
  const fs::path file = dir.path / "journal-000001.log";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Cut the last record anywhere inside it: its header, its data or its CRC; or leave
  // zeros where it was (a file system that had extended the file but not written it).
  for (uint64_t cut = offsets.back() + 1; cut <= bytes.size(); ++cut) {
    std::string torn = bytes.substr(0, cut);
    if (cut == bytes.size())
      std::fill(torn.begin() + static_cast<long>(offsets.back()), torn.end(), '\0');
    std::ofstream(file, std::ios::binary | std::ios::trunc) << torn;
    std::vector<std::string> warnings;
    const DispatcherState state = replayed(dir.path, &warnings);
    EXPECT_EQ(state.workers().size(), 4u) << "cut at " << cut;
    ASSERT_EQ(warnings.size(), 1u) << "cut at " << cut;
    EXPECT_NE(warnings[0].find("journal-000001.log"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("at byte " + std::to_string(offsets.back())), std::string::npos)
        << warnings[0];
  }
}

TEST(Journal, ABadRecordBeforeTheEndIsRefusedNamingFileAndOffset) {
  TempDir dir;
  const auto offsets = write_workers(dir.path, 5);
  const fs::path file = dir.path / "journal-000001.log";
  const uint64_t size = fs::file_size(file);
  auto flip = [&](uint64_t at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(at));
    c = static_cast<char>(c ^ 0x20);
    f.write(&c, 1);
  };
  for (uint64_t at : {offsets[2] + 14, offsets[2] + 1}) {  // record 3's data, its length
    flip(at);
    try {
      replayed(dir.path);
      FAIL() << "a damaged record was replayed";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("journal-000001.log"), std::string::npos) << what;
      EXPECT_NE(
          what.find("CRC at byte " + std::to_string(offsets[2]) + " of " + std::to_string(size)),
          std::string::npos)
          << what;
    }
    flip(at);
    EXPECT_EQ(replayed(dir.path).workers().size(), 5u);
  }
  // A last record damaged in place (a torn write over old bytes) is a torn tail.
  flip(offsets.back() + 14);
  std::vector<std::string> warnings;
  EXPECT_EQ(replayed(dir.path, &warnings).workers().size(), 4u);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(Journal, AnEntryThatDoesNotApplyIsRefusedNamingItsOffset) {
  TempDir dir;
  {
    DispatcherState state;
    Journal journal(dir.path.string(), state);
    record(journal, state, state.register_worker(1, "a:1"));
    JournalEntry bad;
    bad.mutable_done()->set_job(42);  // no job 42
    journal.append(bad);
  }
  try {
    replayed(dir.path);
    FAIL() << "an entry that does not apply was replayed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("journal-000001.log"), std::string::npos) << what;
    EXPECT_NE(what.find("entry at byte "), std::string::npos) << what;
    EXPECT_NE(what.find("no job 42"), std::string::npos) << what;
  }
}

TEST(Journal, CompactionKeepsTheState) {
  TempDir dir;
  std::mt19937_64 rng(7);
  DispatcherState live;
  {
    Journal journal(dir.path.string(), live);
    random_operations(journal, live, rng, 60);
  }
  {
    DispatcherState state;
    Journal journal(dir.path.string(), state, nullptr, /*compact_bytes=*/1);
    EXPECT_TRUE(journal.compacted());
    EXPECT_EQ(state.describe(), live.describe());
    // The snapshot's file alone is left, and the next appends go to a file after it.
    EXPECT_FALSE(fs::exists(dir.path / "journal-000001.log"));
    EXPECT_TRUE(fs::exists(dir.path / "journal-000002.log"));
    EXPECT_EQ(fs::path(journal.path()).filename(), "journal-000003.log");
    random_operations(journal, state, rng, 30);
    live = state;
  }
  EXPECT_EQ(replayed(dir.path).describe(), live.describe());
  // A removal cut short leaves an old file before the snapshot: it is not replayed.
  std::ofstream(dir.path / "journal-000001.log") << "not replayed";
  EXPECT_EQ(replayed(dir.path).describe(), live.describe());
  // A snapshot applies to an empty state only.
  DispatcherState busy;
  busy.apply(busy.register_worker(1, "a:1"));
  EXPECT_THROW(busy.apply(live.snapshot()), Error);
}

}  // namespace
}  // namespace dataecho::service
