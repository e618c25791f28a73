// The dispatcher's state: jobs, their epochs of pieces (PENDING from a record, LEASED to
// a worker for a consumer, DONE), and the workers. It changes only by apply(entry), the
// entries the dispatcher journals first (journal.h), so that replaying the journal after
// a restart gives the same state. Pure: no network, files or clock; a beat's time is
// given by the caller.
//
// The rules (docs/history/2026-12-06-data-service-plan.md, "Positions, exactly once"):
// - at most one live lease per piece; lease ids only grow;
// - consumer r of N owns the lanes k with k mod N == r, and is leased only their pieces,
//   released ones first, then in piece order (sharding "dynamic"); in sharding "static"
//   a worker asks for one lane's pieces, leased one at a time in piece order (a lane's
//   piece only once the ones before it are done: at most one in flight per lane);
// - a lease ends only by its consumer's report: done, or released at the count of
//   records it kept (the piece is then PENDING from there), or by the consumer's rewind
//   to a checkpoint. A silent worker's leases stay until their consumer reports, since
//   only the consumer knows what it kept.
// Each request has a const method that builds its entry and checks it as apply() does
// (throwing an Error that names the job, piece and lease), so one set of rules serves
// requests and replay.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dataecho/proto/service.pb.h"

namespace dataecho::service {

enum class PieceStatus { kPending, kLeased, kDone };

struct PieceState {
  int32_t lane = 0;
  PieceStatus status = PieceStatus::kPending;
  int64_t from = 0;       // pending: where a lease starts; leased: where this one started
  bool released = false;  // pending after a release or rewind: leased before the others
  int64_t lease = 0;      // leased: its id
  int64_t worker = 0;     // leased: to whom
};

struct EpochState {
  std::vector<PieceState> pieces;
  // (consumer, worker) -> the last of the consumer's streams from the worker that it cut:
  // that stream and those before it get no more of its pieces in the epoch (until the
  // consumer's next rewind); a stream it reopens after (a later number) does.
  std::map<std::pair<int32_t, int64_t>, int64_t> closed;
};

struct JobState {
  int64_t id = 0;
  JobSpec spec;
  std::string plan_json;
  std::map<int64_t, EpochState> epochs;
  std::vector<int64_t> incarnations;  // per consumer: its last rewind's
  bool stopped = false;
};

// The rate of a growing count (a worker's elements sent) over the last interval of at
// least `interval_ms` between its samples. Pure: the time is the caller's.
class RateMeter {
 public:
  explicit RateMeter(int64_t interval_ms = 1000) : interval_ms_(interval_ms) {}
  void add(int64_t count, int64_t now_ms);
  double per_second() const { return rate_; }  // 0 until an interval has passed

 private:
  int64_t interval_ms_;
  int64_t count_ = 0;
  int64_t since_ms_ = -1;  // the interval's start; -1: no sample yet
  double rate_ = 0;
};

struct WorkerState {
  std::string address;
  int64_t last_beat_ms = 0;  // not journaled
};

class DispatcherState {
 public:
  // The only mutator of jobs, pieces and workers. Throws an Error naming what is wrong
  // for an entry that does not apply here.
  void apply(const JournalEntry& entry);

  // ---- the entries of requests, checked (Errors as apply's) ----
  // A new job, or nullopt when a job of that name and fingerprint runs already; refuses
  // another fingerprint under a running job's name, and lanes that do not split evenly.
  std::optional<JournalEntry> register_job(const JobSpec& spec, const std::string& plan_json) const;
  JournalEntry register_worker(int64_t worker, const std::string& address) const;
  JournalEntry open_epoch(int64_t job, int64_t epoch,
                          const std::vector<int32_t>& piece_lanes) const;
  // The consumer's next piece of the epoch, leased to `worker`; nullopt when none is
  // pending. Sharding "static": the next piece of `lane` (one of the consumer's), nullopt
  // while the one before it is leased or when the lane is done (lane_done()).
  std::optional<JournalEntry> next_lease(int64_t job, int32_t consumer, int64_t epoch,
                                         int64_t worker, int32_t lane = -1) const;
  JournalEntry done(int64_t job, int64_t epoch, int64_t piece, int64_t lease) const;
  JournalEntry release(int64_t job, int64_t epoch, int64_t piece, int64_t lease,
                       int64_t kept) const;
  JournalEntry rewind(int64_t job, int32_t consumer, int64_t incarnation, int64_t epoch,
                      const std::vector<PiecePos>& positions) const;
  JournalEntry close_stream(int64_t job, int64_t epoch, int32_t consumer, int64_t worker,
                            int64_t stream = 0) const;
  JournalEntry stop_job(int64_t job) const;
  // The whole state as one entry, which apply() takes on an empty state only (the first
  // entry of a compacted journal).
  JournalEntry snapshot() const;

  // ---- queries ----
  const JobState* find_job(const std::string& name) const;  // the running job of that name
  const JobState& job(int64_t id) const;                    // throws for an unknown id
  const std::map<int64_t, WorkerState>& workers() const { return workers_; }
  const std::map<int64_t, JobState>& jobs() const { return jobs_; }
  // Whether every piece of the consumer's lanes in the epoch is done.
  bool epoch_done(int64_t job, int32_t consumer, int64_t epoch) const;
  // Whether every piece of the lane in the epoch is done.
  bool lane_done(int64_t job, int64_t epoch, int32_t lane) const;
  // Whether the consumer cut its stream from the worker in the epoch (false when the
  // epoch is not open).
  // Whether the consumer's stream `stream` from the worker is closed.
  bool closed(int64_t job, int64_t epoch, int32_t consumer, int64_t worker,
              int64_t stream = 0) const;
  // The piece of the epoch leased to `worker` for `consumer` (in `lane`, when not -1)
  // under a lease after `after`, if any (a lease whose reply the worker did not get).
  std::optional<int64_t> leased_after(int64_t job, int64_t epoch, int32_t consumer, int64_t worker,
                                      int64_t after, int32_t lane = -1) const;
  // The whole state as text, one line per job, epoch and worker (tests, status).
  std::string describe() const;

  // ---- liveness: not journaled ----
  void beat(int64_t worker, int64_t now_ms);
  // Workers whose last beat is more than timeout_ms before now_ms, in number order.
  std::vector<int64_t> silent_workers(int64_t now_ms, int64_t timeout_ms) const;

 private:
  void check(const JournalEntry& entry) const;
  void check_job(const RegisterJob& r) const;
  void check_epoch(const OpenEpoch& o) const;
  void check_lease(const Lease& l) const;
  std::optional<size_t> next_static(const JobState& j, int32_t consumer, int64_t epoch,
                                    int32_t lane) const;
  void check_report(bool done, const PieceReport& r) const;
  void check_rewind(const Rewind& r) const;
  void check_close(const CloseStream& c) const;
  const JobState& running_job(int64_t id) const;  // refuses a stopped job
  JobState& job_mut(int64_t id) { return const_cast<JobState&>(job(id)); }
  const PieceState& leased_piece(int64_t job, int64_t epoch, int64_t piece, int64_t lease) const;
  void apply_rewind(const Rewind& r);
  void apply_snapshot(const StateSnapshot& s);

  std::map<int64_t, JobState> jobs_;
  std::map<int64_t, WorkerState> workers_;
  int64_t last_lease_ = 0;
};

// Sharding "static": consumer `consumer`'s pieces of an epoch (`piece_lanes`: each
// piece's lane, the epoch's deal) in the order it returns them: its lanes round robin
// (ascending), each lane's pieces in piece order: the first piece of each of its lanes,
// then the second of each, and so on.
std::vector<int64_t> static_order(const std::vector<int32_t>& piece_lanes, int32_t consumers,
                                  int32_t consumer);

}  // namespace dataecho::service
