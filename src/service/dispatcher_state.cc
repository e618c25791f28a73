// Why this file is long: every journal entry's rule is here, checked for a request and
// again when applied (on replay too), with the snapshot both ways: one set of rules.
#include "service/dispatcher_state.h"

#include <algorithm>
#include <sstream>

#include "dataecho/core/error.h"

namespace dataecho::service {
namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw_error(ErrorCode::kInvalidArgument, "dispatcher", message);
}

std::string piece_name(const JobState& job, int64_t epoch, int64_t piece) {
  return "job '" + job.spec.name() + "' epoch " + std::to_string(epoch) + " piece " +
         std::to_string(piece);
}

bool owns(const JobState& job, int32_t consumer, int32_t lane) {
  return lane % job.spec.consumers() == consumer;
}

// "1, 2, 3, 4, 6 or 12": the counts of consumers that `lanes` lanes split over evenly.
std::string divisors(int32_t lanes) {
  std::vector<std::string> d;
  for (int32_t n = 1; n <= lanes; ++n)
    if (lanes % n == 0) d.push_back(std::to_string(n));
  std::string s;
  for (size_t i = 0; i < d.size(); ++i)
    s += (i == 0 ? "" : i + 1 == d.size() ? " or " : ", ") + d[i];
  return s;
}

std::string short_fingerprint(const std::string& f) {
  return f.size() > 12 ? f.substr(0, 12) + "..." : f;
}

const EpochState& epoch_of(const JobState& job, int64_t epoch) {
  auto it = job.epochs.find(epoch);
  if (it == job.epochs.end())
    refuse("job '" + job.spec.name() + "' has no epoch " + std::to_string(epoch) + " open");
  return it->second;
}

const PieceState& piece_of(const JobState& job, int64_t epoch, int64_t piece) {
  const auto& pieces = epoch_of(job, epoch).pieces;
  if (piece < 0 || piece >= static_cast<int64_t>(pieces.size()))
    refuse(piece_name(job, epoch, piece) + ": the epoch has " + std::to_string(pieces.size()) +
           " pieces");
  return pieces[static_cast<size_t>(piece)];
}

void check_consumer(const JobState& job, int32_t consumer) {
  if (consumer < 0 || consumer >= job.spec.consumers())
    refuse("job '" + job.spec.name() + "' has " + std::to_string(job.spec.consumers()) +
           " consumers: no consumer " + std::to_string(consumer));
}

bool is_static(const JobState& job) { return job.spec.sharding() == JobSpec::STATIC; }

// Sharding "static": the first piece of `lane` (in piece order) that is not done, if any.
std::optional<size_t> lane_front(const EpochState& e, int32_t lane) {
  for (size_t i = 0; i < e.pieces.size(); ++i)
    if (e.pieces[i].lane == lane && e.pieces[i].status != PieceStatus::kDone) return i;
  return std::nullopt;
}

char status_letter(PieceStatus s) {
  return s == PieceStatus::kPending ? 'P' : s == PieceStatus::kLeased ? 'L' : 'D';
}

}  // namespace

const JobState& DispatcherState::job(int64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) refuse("no job " + std::to_string(id));
  return it->second;
}

const JobState* DispatcherState::find_job(const std::string& name) const {
  for (const auto& [id, job] : jobs_)
    if (!job.stopped && job.spec.name() == name) return &job;
  return nullptr;
}

const PieceState& DispatcherState::leased_piece(int64_t job_id, int64_t epoch, int64_t piece,
                                                int64_t lease) const {
  const JobState& j = job(job_id);
  const PieceState& p = piece_of(j, epoch, piece);
  if (p.status != PieceStatus::kLeased || p.lease != lease)
    refuse(piece_name(j, epoch, piece) + ": lease " + std::to_string(lease) +
           " is not the piece's live lease (" +
           (p.status == PieceStatus::kLeased ? "lease " + std::to_string(p.lease)
            : p.status == PieceStatus::kDone ? std::string("done")
                                             : std::string("pending")) +
           ")");
  return p;
}

void DispatcherState::check_job(const RegisterJob& r) const {
  const JobSpec& s = r.spec();
  const int64_t next = jobs_.empty() ? 1 : jobs_.rbegin()->first + 1;
  if (r.job() != next)
    refuse("job id " + std::to_string(r.job()) + ", expected " + std::to_string(next));
  if (s.name().empty()) refuse("a job needs a name");
  if (s.lanes() < 1 || s.consumers() < 1)
    refuse("job '" + s.name() + "': lanes and consumers must be at least 1");
  if (s.lanes() % s.consumers() != 0)
    refuse(std::to_string(s.lanes()) + " lanes do not split over " + std::to_string(s.consumers()) +
           " consumers: use " + divisors(s.lanes()));
  if (const JobState* old = find_job(s.name()))
    refuse("job '" + s.name() + "' exists with another upstream (" +
           short_fingerprint(old->spec.fingerprint()) + " vs " +
           short_fingerprint(s.fingerprint()) +
           "): name it differently or `dataecho service stop-job`");
}

const JobState& DispatcherState::running_job(int64_t id) const {
  const JobState& j = job(id);
  if (j.stopped) refuse("job '" + j.spec.name() + "' was stopped");
  return j;
}

void DispatcherState::check_epoch(const OpenEpoch& o) const {
  const JobState& j = running_job(o.job());
  if (o.epoch() < 0 || j.epochs.count(o.epoch()))
    refuse("job '" + j.spec.name() + "': epoch " + std::to_string(o.epoch()) +
           " cannot be opened (open already, or negative)");
  if (o.piece_lane().empty()) refuse("job '" + j.spec.name() + "': an epoch of no pieces");
  for (int32_t lane : o.piece_lane())
    if (lane < 0 || lane >= j.spec.lanes())
      refuse("job '" + j.spec.name() + "' has " + std::to_string(j.spec.lanes()) +
             " lanes: no lane " + std::to_string(lane));
}

void DispatcherState::check_lease(const Lease& l) const {
  const JobState& j = running_job(l.job());
  check_consumer(j, l.consumer());
  const PieceState& p = piece_of(j, l.epoch(), l.piece());
  const std::string name = piece_name(j, l.epoch(), l.piece());
  if (p.status != PieceStatus::kPending) refuse(name + " is not pending");
  if (l.lease() <= last_lease_)
    refuse(name + ": lease " + std::to_string(l.lease()) + " is not after lease " +
           std::to_string(last_lease_));
  if (l.from() != p.from || l.lane() != p.lane || !owns(j, l.consumer(), p.lane))
    refuse(name + ": the lease's start, lane or consumer differ from the piece's");
  if (!workers_.count(l.worker())) refuse("no worker " + std::to_string(l.worker()));
  if (is_static(j) && lane_front(epoch_of(j, l.epoch()), p.lane) != static_cast<size_t>(l.piece()))
    refuse(name +
           ": sharding \"static\" leases a lane's pieces in order, one at a time (an "
           "earlier piece of lane " +
           std::to_string(p.lane) + " is not done)");
}

void DispatcherState::check_report(bool done, const PieceReport& r) const {
  const PiecePos& pos = r.pos();
  const PieceState& p = leased_piece(r.job(), pos.epoch(), pos.piece(), pos.lease());
  if (!done && pos.records() < p.from)
    refuse(piece_name(job(r.job()), pos.epoch(), pos.piece()) + ": released at record " +
           std::to_string(pos.records()) + ", before its lease's start " + std::to_string(p.from));
}

void DispatcherState::check_rewind(const Rewind& r) const {
  const JobState& j = job(r.job());
  check_consumer(j, r.consumer());
  epoch_of(j, r.epoch());
  const int64_t last = j.incarnations.at(static_cast<size_t>(r.consumer()));
  if (r.incarnation() <= last)
    refuse("job '" + j.spec.name() + "' consumer " + std::to_string(r.consumer()) +
           ": incarnation " + std::to_string(r.incarnation()) + " is not after " +
           std::to_string(last));
  for (const PiecePos& pos : r.pos()) {
    const PieceState& p = piece_of(j, r.epoch(), pos.piece());
    if (pos.epoch() != r.epoch() || !owns(j, r.consumer(), p.lane) || pos.records() < 0)
      refuse(piece_name(j, pos.epoch(), pos.piece()) + ": not a position of consumer " +
             std::to_string(r.consumer()) + " in epoch " + std::to_string(r.epoch()));
  }
}

void DispatcherState::check_close(const CloseStream& c) const {
  const JobState& j = running_job(c.job());
  check_consumer(j, c.consumer());
  epoch_of(j, c.epoch());
  if (!workers_.count(c.worker())) refuse("no worker " + std::to_string(c.worker()));
}

void DispatcherState::check(const JournalEntry& entry) const {
  switch (entry.entry_case()) {
    case JournalEntry::kRegisterJob:
      return check_job(entry.register_job());
    case JournalEntry::kRegisterWorker:
      if (entry.register_worker().worker() < 1) refuse("worker numbers start at 1");
      return;
    case JournalEntry::kOpenEpoch:
      return check_epoch(entry.open_epoch());
    case JournalEntry::kLease:
      return check_lease(entry.lease());
    case JournalEntry::kRelease:
      return check_report(false, entry.release());
    case JournalEntry::kDone:
      return check_report(true, entry.done());
    case JournalEntry::kRewind:
      return check_rewind(entry.rewind());
    case JournalEntry::kCloseStream:
      return check_close(entry.close_stream());
    case JournalEntry::kStopJob: {
      const JobState& j = job(entry.stop_job().job());
      if (j.stopped) refuse("job '" + j.spec.name() + "' was stopped already");
      return;
    }
    case JournalEntry::kSnapshot:
      if (!jobs_.empty() || !workers_.empty() || last_lease_ != 0)
        refuse("a snapshot applies to an empty state only");
      for (const JobSnapshot& j : entry.snapshot().jobs())
        for (const EpochSnapshot& e : j.epochs())
          for (const PieceSnapshot& p : e.pieces())
            if (p.status() < 0 || p.status() > 2 || p.lane() < 0 ||
                p.lane() >= j.job().spec().lanes())
              refuse("a snapshot's piece of job " + std::to_string(j.job().job()) +
                     " has no valid lane or status");
      return;
    case JournalEntry::ENTRY_NOT_SET:
      refuse("an empty entry");
  }
}

void DispatcherState::apply(const JournalEntry& entry) {
  check(entry);
  switch (entry.entry_case()) {
    case JournalEntry::kRegisterJob: {
      JobState& j = jobs_[entry.register_job().job()];
      j.id = entry.register_job().job();
      j.spec = entry.register_job().spec();
      j.plan_json = entry.register_job().plan_json();
      j.incarnations.assign(static_cast<size_t>(j.spec.consumers()), 0);
      break;
    }
    case JournalEntry::kRegisterWorker:
      workers_[entry.register_worker().worker()].address = entry.register_worker().address();
      break;
    case JournalEntry::kOpenEpoch: {
      EpochState& e = job_mut(entry.open_epoch().job()).epochs[entry.open_epoch().epoch()];
      for (int32_t lane : entry.open_epoch().piece_lane()) e.pieces.push_back({.lane = lane});
      break;
    }
    case JournalEntry::kLease: {
      const Lease& l = entry.lease();
      PieceState& p =
          job_mut(l.job()).epochs.at(l.epoch()).pieces.at(static_cast<size_t>(l.piece()));
      p.status = PieceStatus::kLeased;
      p.released = false;
      p.lease = last_lease_ = l.lease();
      p.worker = l.worker();
      break;
    }
    case JournalEntry::kRelease:
    case JournalEntry::kDone: {
      const bool done = entry.entry_case() == JournalEntry::kDone;
      const PieceReport& r = done ? entry.done() : entry.release();
      PieceState& p = job_mut(r.job())
                          .epochs.at(r.pos().epoch())
                          .pieces.at(static_cast<size_t>(r.pos().piece()));
      p = PieceState{.lane = p.lane,
                     .status = done ? PieceStatus::kDone : PieceStatus::kPending,
                     .from = done ? 0 : r.pos().records(),
                     .released = !done};
      break;
    }
    case JournalEntry::kRewind:
      apply_rewind(entry.rewind());
      break;
    case JournalEntry::kCloseStream: {
      const CloseStream& c = entry.close_stream();
      auto& closed = job_mut(c.job()).epochs.at(c.epoch()).closed;
      const auto [it, added] = closed.try_emplace({c.consumer(), c.worker()}, c.stream());
      if (!added) it->second = std::max(it->second, c.stream());
      break;
    }
    case JournalEntry::kStopJob:
      job_mut(entry.stop_job().job()).stopped = true;
      break;
    case JournalEntry::kSnapshot:
      apply_snapshot(entry.snapshot());
      break;
    case JournalEntry::ENTRY_NOT_SET:
      break;
  }
}

void DispatcherState::apply_rewind(const Rewind& r) {
  JobState& j = job_mut(r.job());
  j.incarnations[static_cast<size_t>(r.consumer())] = r.incarnation();
  for (auto& [epoch, e] : j.epochs) {
    if (epoch < r.epoch()) continue;
    for (PieceState& p : e.pieces)
      if (owns(j, r.consumer(), p.lane)) p = PieceState{.lane = p.lane};
    std::erase_if(e.closed, [&](const auto& c) { return c.first.first == r.consumer(); });
  }
  auto& pieces = j.epochs.at(r.epoch()).pieces;
  for (const PiecePos& pos : r.pos()) {
    PieceState& p = pieces.at(static_cast<size_t>(pos.piece()));
    if (pos.done())
      p.status = PieceStatus::kDone;
    else
      p.from = pos.records();
    p.released = !pos.done() && pos.records() > 0;
  }
}

void DispatcherState::apply_snapshot(const StateSnapshot& s) {
  for (const JobSnapshot& js : s.jobs()) {
    JobState& j = jobs_[js.job().job()];
    j.id = js.job().job();
    j.spec = js.job().spec();
    j.plan_json = js.job().plan_json();
    j.incarnations.assign(js.incarnations().begin(), js.incarnations().end());
    j.stopped = js.stopped();
    for (const EpochSnapshot& es : js.epochs()) {
      EpochState& e = j.epochs[es.epoch()];
      for (const CloseStream& c : es.closed()) e.closed[{c.consumer(), c.worker()}] = c.stream();
      auto& pieces = e.pieces;
      for (const PieceSnapshot& p : es.pieces())
        pieces.push_back({.lane = p.lane(),
                          .status = static_cast<PieceStatus>(p.status()),
                          .from = p.from(),
                          .released = p.released(),
                          .lease = p.lease(),
                          .worker = p.worker()});
    }
  }
  for (const RegisterWorker& w : s.workers()) workers_[w.worker()].address = w.address();
  last_lease_ = s.last_lease();
}

JournalEntry DispatcherState::snapshot() const {
  JournalEntry e;
  StateSnapshot* s = e.mutable_snapshot();
  for (const auto& [id, j] : jobs_) {
    JobSnapshot* js = s->add_jobs();
    js->mutable_job()->set_job(id);
    *js->mutable_job()->mutable_spec() = j.spec;
    js->mutable_job()->set_plan_json(j.plan_json);
    for (int64_t i : j.incarnations) js->add_incarnations(i);
    js->set_stopped(j.stopped);
    for (const auto& [epoch, ep] : j.epochs) {
      EpochSnapshot* es = js->add_epochs();
      es->set_epoch(epoch);
      for (const PieceState& p : ep.pieces) {
        PieceSnapshot* ps = es->add_pieces();
        ps->set_lane(p.lane);
        ps->set_status(static_cast<int32_t>(p.status));
        ps->set_from(p.from);
        ps->set_released(p.released);
        ps->set_lease(p.lease);
        ps->set_worker(p.worker);
      }
      for (const auto& [key, stream] : ep.closed) {
        CloseStream* c = es->add_closed();
        c->set_job(id);
        c->set_epoch(epoch);
        c->set_consumer(key.first);
        c->set_worker(key.second);
        c->set_stream(stream);
      }
    }
  }
  for (const auto& [number, w] : workers_) {
    RegisterWorker* rw = s->add_workers();
    rw->set_worker(number);
    rw->set_address(w.address);
  }
  s->set_last_lease(last_lease_);
  return e;
}

std::optional<JournalEntry> DispatcherState::register_job(const JobSpec& spec,
                                                          const std::string& plan_json) const {
  if (const JobState* old = find_job(spec.name());
      old != nullptr && old->spec.fingerprint() == spec.fingerprint())
    return std::nullopt;
  JournalEntry e;
  RegisterJob* r = e.mutable_register_job();
  r->set_job(jobs_.empty() ? 1 : jobs_.rbegin()->first + 1);
  *r->mutable_spec() = spec;
  r->set_plan_json(plan_json);
  check(e);
  return e;
}

JournalEntry DispatcherState::register_worker(int64_t worker, const std::string& address) const {
  JournalEntry e;
  e.mutable_register_worker()->set_worker(worker);
  e.mutable_register_worker()->set_address(address);
  check(e);
  return e;
}

JournalEntry DispatcherState::open_epoch(int64_t job, int64_t epoch,
                                         const std::vector<int32_t>& piece_lanes) const {
  JournalEntry e;
  e.mutable_open_epoch()->set_job(job);
  e.mutable_open_epoch()->set_epoch(epoch);
  for (int32_t lane : piece_lanes) e.mutable_open_epoch()->add_piece_lane(lane);
  check(e);
  return e;
}

std::optional<size_t> DispatcherState::next_static(const JobState& j, int32_t consumer,
                                                   int64_t epoch, int32_t lane) const {
  if (lane < 0 || lane >= j.spec.lanes() || !owns(j, consumer, lane))
    refuse("job '" + j.spec.name() + "': consumer " + std::to_string(consumer) + " has no lane " +
           std::to_string(lane) + " (sharding \"static\" asks for one)");
  const auto front = lane_front(epoch_of(j, epoch), lane);
  if (!front || epoch_of(j, epoch).pieces[*front].status != PieceStatus::kPending)
    return std::nullopt;
  return front;
}

std::optional<JournalEntry> DispatcherState::next_lease(int64_t job_id, int32_t consumer,
                                                        int64_t epoch, int64_t worker,
                                                        int32_t lane) const {
  const JobState& j = running_job(job_id);
  check_consumer(j, consumer);
  if (!workers_.count(worker)) refuse("no worker " + std::to_string(worker));
  const auto& pieces = epoch_of(j, epoch).pieces;
  std::optional<size_t> chosen;
  if (is_static(j)) chosen = next_static(j, consumer, epoch, lane);
  for (size_t i = 0; i < pieces.size() && !is_static(j); ++i) {
    const PieceState& p = pieces[i];
    if (p.status != PieceStatus::kPending || !owns(j, consumer, p.lane)) continue;
    if (p.released) {
      chosen = i;
      break;
    }
    if (!chosen) chosen = i;
  }
  if (!chosen) return std::nullopt;
  JournalEntry e;
  Lease* l = e.mutable_lease();
  l->set_job(job_id);
  l->set_epoch(epoch);
  l->set_piece(static_cast<int64_t>(*chosen));
  l->set_lease(last_lease_ + 1);
  l->set_from(pieces[*chosen].from);
  l->set_lane(pieces[*chosen].lane);
  l->set_worker(worker);
  l->set_consumer(consumer);
  check(e);
  return e;
}

namespace {

JournalEntry report(bool done, int64_t job, int64_t epoch, int64_t piece, int64_t lease,
                    int64_t records) {
  JournalEntry e;
  PieceReport* r = done ? e.mutable_done() : e.mutable_release();
  r->set_job(job);
  r->mutable_pos()->set_epoch(epoch);
  r->mutable_pos()->set_piece(piece);
  r->mutable_pos()->set_lease(lease);
  r->mutable_pos()->set_records(records);
  r->mutable_pos()->set_done(done);
  return e;
}

}  // namespace

JournalEntry DispatcherState::done(int64_t job, int64_t epoch, int64_t piece, int64_t lease) const {
  JournalEntry e = report(true, job, epoch, piece, lease, 0);
  check(e);
  return e;
}

JournalEntry DispatcherState::release(int64_t job, int64_t epoch, int64_t piece, int64_t lease,
                                      int64_t kept) const {
  JournalEntry e = report(false, job, epoch, piece, lease, kept);
  check(e);
  return e;
}

JournalEntry DispatcherState::rewind(int64_t job, int32_t consumer, int64_t incarnation,
                                     int64_t epoch, const std::vector<PiecePos>& positions) const {
  JournalEntry e;
  Rewind* r = e.mutable_rewind();
  r->set_job(job);
  r->set_consumer(consumer);
  r->set_incarnation(incarnation);
  r->set_epoch(epoch);
  for (const PiecePos& p : positions) *r->add_pos() = p;
  check(e);
  return e;
}

JournalEntry DispatcherState::close_stream(int64_t job, int64_t epoch, int32_t consumer,
                                           int64_t worker, int64_t stream) const {
  JournalEntry e;
  CloseStream* c = e.mutable_close_stream();
  c->set_job(job);
  c->set_epoch(epoch);
  c->set_consumer(consumer);
  c->set_worker(worker);
  c->set_stream(stream);
  check(e);
  return e;
}

JournalEntry DispatcherState::stop_job(int64_t job) const {
  JournalEntry e;
  e.mutable_stop_job()->set_job(job);
  check(e);
  return e;
}

bool DispatcherState::epoch_done(int64_t job_id, int32_t consumer, int64_t epoch) const {
  const JobState& j = job(job_id);
  check_consumer(j, consumer);
  for (const PieceState& p : epoch_of(j, epoch).pieces)
    if (owns(j, consumer, p.lane) && p.status != PieceStatus::kDone) return false;
  return true;
}

bool DispatcherState::lane_done(int64_t job_id, int64_t epoch, int32_t lane) const {
  return !lane_front(epoch_of(job(job_id), epoch), lane).has_value();
}

bool DispatcherState::closed(int64_t job_id, int64_t epoch, int32_t consumer, int64_t worker,
                             int64_t stream) const {
  const auto& epochs = job(job_id).epochs;
  const auto it = epochs.find(epoch);
  if (it == epochs.end()) return false;
  const auto c = it->second.closed.find({consumer, worker});
  return c != it->second.closed.end() && stream <= c->second;
}

std::optional<int64_t> DispatcherState::leased_after(int64_t job_id, int64_t epoch,
                                                     int32_t consumer, int64_t worker,
                                                     int64_t after, int32_t lane) const {
  const JobState& j = job(job_id);
  const auto& pieces = epoch_of(j, epoch).pieces;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const PieceState& p = pieces[i];
    if (p.status == PieceStatus::kLeased && p.worker == worker && p.lease > after &&
        owns(j, consumer, p.lane) && (lane < 0 || p.lane == lane))
      return static_cast<int64_t>(i);
  }
  return std::nullopt;
}

std::string DispatcherState::describe() const {
  std::ostringstream out;
  for (const auto& [id, j] : jobs_) {
    out << "job " << id << " '" << j.spec.name() << "' " << j.spec.fingerprint() << " lanes "
        << j.spec.lanes() << " consumers " << j.spec.consumers() << (j.stopped ? " stopped" : "")
        << " plan " << j.plan_json << " incarnations";
    for (int64_t i : j.incarnations) out << ' ' << i;
    out << '\n';
    for (const auto& [epoch, e] : j.epochs) {
      out << "  epoch " << epoch << ':';
      for (const PieceState& p : e.pieces)
        out << ' ' << status_letter(p.status) << p.lane << '@' << p.from << (p.released ? "r" : "")
            << (p.status == PieceStatus::kLeased
                    ? "/" + std::to_string(p.lease) + "w" + std::to_string(p.worker)
                    : "");
      for (const auto& [key, stream] : e.closed)
        out << " closed " << key.first << '/' << key.second
            << (stream ? "#" + std::to_string(stream) : "");
      out << '\n';
    }
  }
  for (const auto& [number, w] : workers_) out << "worker " << number << ' ' << w.address << '\n';
  out << "last lease " << last_lease_ << '\n';
  return out.str();
}

void DispatcherState::beat(int64_t worker, int64_t now_ms) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) refuse("no worker " + std::to_string(worker));
  it->second.last_beat_ms = now_ms;
}

std::vector<int64_t> DispatcherState::silent_workers(int64_t now_ms, int64_t timeout_ms) const {
  std::vector<int64_t> silent;
  for (const auto& [number, w] : workers_)
    if (now_ms - w.last_beat_ms > timeout_ms) silent.push_back(number);
  return silent;
}

std::vector<int64_t> static_order(const std::vector<int32_t>& piece_lanes, int32_t consumers,
                                  int32_t consumer) {
  std::map<int32_t, std::vector<int64_t>> lanes;  // the consumer's lanes, ascending
  for (size_t p = 0; p < piece_lanes.size(); ++p)
    if (piece_lanes[p] % consumers == consumer)
      lanes[piece_lanes[p]].push_back(static_cast<int64_t>(p));
  std::vector<int64_t> order;
  for (size_t round = 0; order.size() < piece_lanes.size(); ++round) {
    bool any = false;
    for (const auto& [lane, pieces] : lanes)
      if (round < pieces.size()) {
        order.push_back(pieces[round]);
        any = true;
      }
    if (!any) break;
  }
  return order;
}

void RateMeter::add(int64_t count, int64_t now_ms) {
  if (since_ms_ < 0 || count < count_) {  // the first sample, or a count that restarted
    since_ms_ = now_ms;
    count_ = count;
    return;
  }
  if (now_ms - since_ms_ < interval_ms_) return;
  rate_ = static_cast<double>(count - count_) * 1000.0 / static_cast<double>(now_ms - since_ms_);
  since_ms_ = now_ms;
  count_ = count;
}

}  // namespace dataecho::service
