// The dispatcher: jobs and workers (dispatcher_state.h), journaled when given a folder
// (journal.h), served over the transport's unary calls:
// - GetOrCreateJob: a consumer's job by name and upstream fingerprint, made on first
//   use; another fingerprint under a running job's name is refused;
// - WorkerBeat: registers a worker (its number given at its first beat) and lists the
//   jobs it serves;
// - Status: jobs and workers, for `dataecho service status`;
// - StopJob: `dataecho service stop-job`: the job's name is free again;
// - StopWorker: `dataecho service stop-worker`: the worker is told to leave by its next
//   beat's reply, and given no new lease from now on; it says when it is leaving and when
//   it has left, which the status shows (a worker that left is not one that failed);
// - SetWorkers: `dataecho service scale`: the workers to keep serving, which the
//   launcher (launcher.h) launches or asks to leave, on its own thread;
// - sharding "dynamic" and "static": GetSplit (a worker asks for a consumer's next piece
//   (static: of one lane, one at a time in piece order): a lease, none pending now, or
//   the end of the consumer's lanes (static: that lane) of the epoch), PieceDone and
//   Release (a consumer's reports: a piece it has whole; the leases of a worker whose
//   stream it cut, at the records it kept, and that stream closed), and Rewind (a consumer
//   starting an epoch: a new incarnation, its pieces where its state says; the reply
//   gives the epoch's deal, from which a static consumer knows its order). The job's
//   plan is made once, through the injected PlanFn, and journaled with the job (after a
//   restart made again, and checked against the journal); an epoch's deal when it is
//   first asked for. Replies may be lost and calls retried: a lease the worker did not
//   get is given again, a piece done again and a stream released again change nothing.
// Every request's Hello is checked (protocol.h). One lock over the state: the calls are
// small and few (a beat per worker every half second).
#include <chrono>
#include <mutex>
#include <sstream>

#include "dataecho/service/service.h"
#include "service/calls.h"
#include "service/dispatcher_state.h"
#include "service/journal.h"
#include "service/launcher.h"

namespace dataecho::service {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string consumer_name(const JobSpec& spec) { return "(job '" + spec.name() + "')"; }

class DispatcherImpl final : public Dispatcher {
 public:
  explicit DispatcherImpl(const DispatcherOptions& o)
      : worker_timeout_ms_(o.worker_timeout_ms), plan_fn_(o.plan) {
    if (!o.journal_dir.empty())
      journal_ = std::make_unique<Journal>(o.journal_dir, state_, &warnings_);
    auto transport = o.transport ? o.transport : default_transport();
    Handlers h;
    h.unary = [this](const std::string& method, std::string_view request) {
      return serve_unary([&] { return handle(method, request); });
    };
    server_ = transport->start_server(o.bind + ":" + std::to_string(o.port),
                                      server_transport(o.tls), o.token, std::move(h));
    launcher_ = std::make_unique<Launcher>(o.launch, o.bind, server_->port(), o.token,
                                           posix_processes(), now_ms);
  }
  ~DispatcherImpl() override { stop(); }

  int port() const override { return server_->port(); }
  const std::vector<std::string>& journal_warnings() const override { return warnings_; }
  std::string journal_path() const override { return journal_ ? journal_->path() : ""; }
  void stop() override {
    server_->stop(0);
    std::lock_guard lock(launch_mu_);
    launch_loop_.reset();  // its launched workers still running get SIGTERM: they leave
  }

 private:
  std::string handle(const std::string& method, std::string_view request) {
    if (method == kGetOrCreateJob) return get_or_create_job(request);
    if (method == kWorkerBeat) return worker_beat(request);
    if (method == kStatus) return status(request);
    if (method == kStopJob) return stop_job(request);
    if (method == kStopWorker) return stop_worker(request);
    if (method == kSetWorkers) return set_workers(request);
    if (method == kGetSplit) return get_split(request);
    if (method == kPieceDone) return piece_done(request);
    if (method == kRelease) return release(request);
    if (method == kRewind) return rewind(request);
    throw CallError(CallCode::kNotFound, "the dispatcher has no method " + method);
  }

  // Journals the entry (when there is a journal), then applies it.
  void record(const JournalEntry& entry) {
    if (journal_) journal_->append(entry);
    state_.apply(entry);
  }

  WorkerInfo info_of(int64_t worker, int64_t now) const {
    WorkerInfo w = info_.count(worker) ? info_.at(worker) : WorkerInfo();
    w.set_worker(worker);
    w.set_address(state_.workers().at(worker).address);
    w.set_beat_age_ms(now - state_.workers().at(worker).last_beat_ms);
    w.set_state(state_of(worker, now));
    const auto life = life_.find(worker);
    if (life != life_.end()) {
      w.set_rate(life->second.left ? 0.0 : life->second.rate.per_second());
      w.set_pieces(life->second.pieces);
    }
    return w;
  }

  // What the beats say of a worker, besides its counts (not journaled).
  struct Life {
    RateMeter rate;
    int64_t pieces = 0;        // leases given
    bool leave_asked = false;  // by StopWorker
    bool leaving = false;      // its beat says so
    bool left = false;         // its last beat says so
  };

  // "alive", "silent", "leaving" or "left". Under mu_.
  std::string state_of(int64_t worker, int64_t now) const {
    const auto life = life_.find(worker);
    if (life != life_.end() && life->second.left) return "left";
    if (life != life_.end() && (life->second.leaving || life->second.leave_asked)) return "leaving";
    return now - state_.workers().at(worker).last_beat_ms <= worker_timeout_ms_ ? "alive"
                                                                                : "silent";
  }
  // Whether the worker takes new streams and leases. Under mu_.
  bool leaving(int64_t worker) const {
    const auto life = life_.find(worker);
    return life != life_.end() &&
           (life->second.left || life->second.leaving || life->second.leave_asked);
  }

  std::string get_or_create_job(std::string_view bytes) {
    const auto request = parse_request<JobRequest>(bytes, kGetOrCreateJob);
    check_hello(request.hello(), consumer_name(request.spec()), "dispatcher");
    JobSpec spec = request.spec();
    std::lock_guard lock(mu_);
    if (auto entry = state_.register_job(spec, "")) {
      std::shared_ptr<const JobPlan> plan;
      if (spec.sharding() != JobSpec::OFF) {
        plan = make_plan(spec);
        entry->mutable_register_job()->set_plan_json(plan->json);
      }
      record(*entry);
      if (plan) plans_[entry->register_job().job()] = plan;
    }
    const JobState* job = state_.find_job(spec.name());
    JobReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    reply.set_job(job->id);
    *reply.mutable_spec() = job->spec;
    const int64_t now = now_ms();
    for (const auto& [number, w] : state_.workers())
      if (w.last_beat_ms > 0 && now - w.last_beat_ms <= worker_timeout_ms_ && !leaving(number))
        *reply.add_workers() = info_of(number, now);
    return reply.SerializeAsString();
  }

  std::string worker_beat(std::string_view bytes) {
    const auto request = parse_request<WorkerBeatRequest>(bytes, kWorkerBeat);
    check_hello(request.hello(), request.address(), "dispatcher");
    std::lock_guard lock(mu_);
    int64_t number = request.worker();
    if (number == 0) number = state_.workers().empty() ? 1 : state_.workers().rbegin()->first + 1;
    const auto known = state_.workers().find(number);
    if (known == state_.workers().end() || known->second.address != request.address())
      record(state_.register_worker(number, request.address()));
    state_.beat(number, now_ms());
    WorkerInfo& info = info_[number];
    info.set_version(request.hello().version());
    info.set_threads(request.threads());
    info.set_elements(request.elements());
    info.set_bytes(request.bytes());
    Life& life = life_[number];
    life.rate.add(request.elements(), now_ms());
    life.leaving = life.leaving || request.leaving();
    life.left = request.left();
    if (request.worker() == 0 && request.launch_index() > 0 &&
        launcher_->registered(request.launch_index(), number))
      life.leave_asked = true;  // scaled down while it was starting
    WorkerOrders orders;
    *orders.mutable_hello() = make_hello("dispatcher");
    orders.set_worker(number);
    orders.set_leave(life.leave_asked);
    for (const auto& [id, job] : state_.jobs()) {
      if (job.stopped || job.spec.sharding() != JobSpec::OFF) continue;
      JobOrder* o = orders.add_jobs();
      o->set_job(id);
      *o->mutable_spec() = job.spec;
    }
    return orders.SerializeAsString();
  }

  std::string status(std::string_view bytes) {
    const auto request = parse_request<StatusRequest>(bytes, kStatus);
    check_hello(request.hello(), "(service status)", "dispatcher");
    std::lock_guard lock(mu_);
    StatusReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    for (const auto& [id, job] : state_.jobs()) {
      if (job.stopped) continue;
      JobStatus* s = reply.add_jobs();
      s->set_job(id);
      s->set_name(job.spec.name());
      s->set_fingerprint(job.spec.fingerprint());
      s->set_sharding(job.spec.sharding());
      for (const auto& [number, epoch] : job.epochs) *s->add_epochs() = epoch_status(number, epoch);
    }
    const int64_t now = now_ms();
    for (const auto& [number, w] : state_.workers())
      if (w.last_beat_ms > 0) *reply.add_workers() = info_of(number, now);
    reply.set_journal(journal_path());
    reply.set_worker_timeout_ms(worker_timeout_ms_);
    *reply.mutable_launch() = launcher_->status();
    return reply.SerializeAsString();
  }

  std::string stop_job(std::string_view bytes) {
    const auto request = parse_request<StopJobRequest>(bytes, kStopJob);
    check_hello(request.hello(), "(service stop-job)", "dispatcher");
    std::lock_guard lock(mu_);
    const JobState* job = state_.find_job(request.name());
    if (job == nullptr)
      throw CallError(CallCode::kNotFound, "no running job '" + request.name() + "'");
    StopJobReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    reply.set_job(job->id);
    record(state_.stop_job(job->id));
    return reply.SerializeAsString();
  }

  static EpochStatus epoch_status(int64_t number, const EpochState& epoch) {
    EpochStatus e;
    e.set_epoch(number);
    e.set_pieces(static_cast<int64_t>(epoch.pieces.size()));
    for (const PieceState& p : epoch.pieces) {
      if (p.status == PieceStatus::kDone) e.set_done(e.done() + 1);
      if (p.status == PieceStatus::kLeased) e.set_leased(e.leased() + 1);
      if (p.status == PieceStatus::kPending) e.set_pending(e.pending() + 1);
    }
    return e;
  }

  // The worker named "w3", "3" or by its address. Under mu_.
  int64_t find_worker(const std::string& name) const {
    std::ostringstream known;
    for (const auto& [number, w] : state_.workers()) {
      const std::string n = std::to_string(number);
      if (name == w.address || name == n || name == "w" + n) return number;
      known << (known.tellp() > 0 ? ", w" : "w") << n << " " << w.address;
    }
    throw CallError(CallCode::kNotFound,
                    "no worker '" + name + "' (workers: " +
                        (known.tellp() > 0 ? known.str() : std::string("none")) + ")");
  }

  // Tells the worker to leave (by its next beat's reply) and gives it no new lease.
  std::string stop_worker(std::string_view bytes) {
    const auto request = parse_request<StopWorkerRequest>(bytes, kStopWorker);
    check_hello(request.hello(), "(service stop-worker)", "dispatcher");
    std::lock_guard lock(mu_);
    const int64_t number = find_worker(request.worker());
    life_[number].leave_asked = true;
    StopWorkerReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    reply.set_worker(number);
    reply.set_address(state_.workers().at(number).address);
    return reply.SerializeAsString();
  }

  // Sets the workers to keep serving; the launch loop (started at the first call)
  // launches or asks to leave.
  std::string set_workers(std::string_view bytes) {
    const auto request = parse_request<SetWorkersRequest>(bytes, kSetWorkers);
    check_hello(request.hello(), "(service scale)", "dispatcher");
    launcher_->set_target(request.workers(),
                          request.reason().empty() ? "service scale" : request.reason());
    {
      std::lock_guard lock(launch_mu_);
      if (!launch_loop_)
        launch_loop_ = std::make_unique<LaunchLoop>(
            *launcher_, [this] { return serving_workers(); },
            [this](int64_t worker) {
              std::lock_guard l(mu_);
              life_[worker].leave_asked = true;
            });
      launch_loop_->wake();
    }
    SetWorkersReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    reply.set_target(request.workers());
    reply.set_counted(launcher_->counted());
    return reply.SerializeAsString();
  }

  // The workers registered, true where serving (alive and not leaving), for the launcher.
  std::map<int64_t, bool> serving_workers() {
    std::lock_guard lock(mu_);
    std::map<int64_t, bool> workers;
    const int64_t now = now_ms();
    for (const auto& [number, w] : state_.workers())
      workers[number] = now - w.last_beat_ms <= worker_timeout_ms_ && !leaving(number);
    return workers;
  }

  std::shared_ptr<const JobPlan> make_plan(const JobSpec& spec) const {
    if (!plan_fn_)
      throw CallError(CallCode::kInvalidArgument,
                      "job '" + spec.name() +
                          "': this dispatcher cannot plan sharding \"dynamic\" (no plan builder)");
    try {
      return plan_fn_(spec.upstream_json(), spec.lanes());
    } catch (const std::exception& e) {
      throw CallError(CallCode::kInvalidArgument, "job '" + spec.name() +
                                                      "': cannot cut its upstream's source into "
                                                      "pieces: " +
                                                      std::string(e.what()));
    }
  }

  // The job's plan: made at its registration, or again after a restart (through the
  // PlanFn, from the journaled job; it must be the journaled plan). Under mu_.
  const JobPlan& plan_of(const JobState& job) {
    auto& plan = plans_[job.id];
    if (!plan) {
      auto again = make_plan(job.spec);
      if (again->json != job.plan_json)
        throw CallError(CallCode::kInternal,
                        "job '" + job.spec.name() +
                            "': its plan made again differs from the journaled one (the "
                            "upstream's source changed?): journaled " +
                            job.plan_json + ", now " + again->json);
      plan = std::move(again);
    }
    return *plan;
  }

  // Deals the epoch's pieces to lanes when it is first asked for. Under mu_.
  void open_epoch(const JobState& job, int64_t epoch) {
    if (job.epochs.count(epoch)) return;
    record(state_.open_epoch(job.id, epoch, plan_of(job).lanes_of(epoch)));
  }

  // Refuses a call of a consumer's older incarnation (a consumer restarted since). Under mu_.
  static void check_incarnation(const JobState& job, int32_t consumer, int64_t incarnation) {
    const auto& all = job.incarnations;
    if (consumer < 0 || static_cast<size_t>(consumer) >= all.size()) return;  // the state refuses
    const int64_t now = all[static_cast<size_t>(consumer)];
    if (incarnation < now)
      throw CallError(CallCode::kCancelled, "consumer " + std::to_string(consumer) + " of job '" +
                                                job.spec.name() + "' was restarted (incarnation " +
                                                std::to_string(incarnation) + ", now " +
                                                std::to_string(now) + ")");
  }

  // The lease's reply: the lease with its piece's ranges. Under mu_.
  SplitReply lease_reply(const JobState& job, Lease lease) {
    nlohmann::json ranges = nlohmann::json::array();
    for (const RecordRange& r : plan_of(job).pieces.at(static_cast<size_t>(lease.piece())))
      ranges.push_back({r.shard, r.begin, r.end, r.offset});
    lease.set_piece_json(ranges.dump());
    SplitReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    *reply.mutable_lease() = lease;
    reply.set_kind(SplitReply::LEASE);
    return reply;
  }

  // A lease the worker took for the consumer after the stream's previous one, whose reply
  // it did not get (the call retried): given again rather than a second one. Under mu_.
  std::optional<Lease> lost_lease(const JobState& job, const SplitRequest& r) const {
    const auto piece =
        state_.leased_after(job.id, r.epoch(), r.consumer(), r.worker(), r.previous_lease(),
                            job.spec.sharding() == JobSpec::STATIC ? r.lane() : -1);
    if (!piece) return std::nullopt;
    const PieceState& p = job.epochs.at(r.epoch()).pieces.at(static_cast<size_t>(*piece));
    Lease l;
    l.set_job(job.id);
    l.set_epoch(r.epoch());
    l.set_piece(*piece);
    l.set_lease(p.lease);
    l.set_from(p.from);
    l.set_lane(p.lane);
    l.set_worker(p.worker);
    l.set_consumer(r.consumer());
    return l;
  }

  std::string get_split(std::string_view bytes) {
    const auto request = parse_request<SplitRequest>(bytes, kGetSplit);
    check_hello(request.hello(), "worker w" + std::to_string(request.worker()), "dispatcher");
    std::lock_guard lock(mu_);
    const JobState& job = state_.job(request.job());
    check_incarnation(job, request.consumer(), request.incarnation());
    open_epoch(job, request.epoch());
    if (state_.closed(request.job(), request.epoch(), request.consumer(), request.worker(),
                      request.stream()))
      throw CallError(CallCode::kCancelled, "consumer " + std::to_string(request.consumer()) +
                                                " cut its stream from worker w" +
                                                std::to_string(request.worker()) + " in epoch " +
                                                std::to_string(request.epoch()));
    if (auto lost = lost_lease(job, request)) return lease_reply(job, *lost).SerializeAsString();
    if (auto entry = leaving(request.worker())
                         ? std::nullopt
                         : state_.next_lease(request.job(), request.consumer(), request.epoch(),
                                             request.worker(), request.lane())) {
      record(*entry);
      ++life_[request.worker()].pieces;
      return lease_reply(job, entry->lease()).SerializeAsString();
    }
    SplitReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    const bool lanes_done =
        job.spec.sharding() == JobSpec::STATIC
            ? state_.lane_done(request.job(), request.epoch(), request.lane())
            : state_.epoch_done(request.job(), request.consumer(), request.epoch());
    reply.set_kind(lanes_done ? SplitReply::END : SplitReply::NONE);
    return reply.SerializeAsString();
  }

  std::string piece_done(std::string_view bytes) {
    const auto request = parse_request<PieceDoneRequest>(bytes, kPieceDone);
    check_hello(request.hello(), "(job " + std::to_string(request.job()) + ")", "dispatcher");
    std::lock_guard lock(mu_);
    const PiecePos& p = request.pos();
    // Done already: the same report again (its reply was lost, and the call retried).
    const auto& epochs = state_.job(request.job()).epochs;
    const auto epoch = epochs.find(p.epoch());
    const bool again =
        epoch != epochs.end() && p.piece() >= 0 &&
        p.piece() < static_cast<int64_t>(epoch->second.pieces.size()) &&
        epoch->second.pieces[static_cast<size_t>(p.piece())].status == PieceStatus::kDone;
    if (!again) record(state_.done(request.job(), p.epoch(), p.piece(), p.lease()));
    PieceDoneReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    return reply.SerializeAsString();
  }

  // Closes the consumer's stream from the worker and releases the worker's leases of the
  // consumer's lanes at the records the consumer kept (I3). Again after a lost reply: the
  // stream is closed already and the worker holds none of them.
  std::string release(std::string_view bytes) {
    const auto request = parse_request<ReleaseRequest>(bytes, kRelease);
    check_hello(request.hello(), "(job " + std::to_string(request.job()) + ")", "dispatcher");
    std::lock_guard lock(mu_);
    const JobState& job = state_.job(request.job());
    check_incarnation(job, request.consumer(), request.incarnation());
    open_epoch(job, request.epoch());
    if (!state_.closed(job.id, request.epoch(), request.consumer(), request.worker(),
                       request.stream()))
      record(state_.close_stream(job.id, request.epoch(), request.consumer(), request.worker(),
                                 request.stream()));
    std::map<int64_t, int64_t> kept;
    for (const PiecePos& p : request.kept()) kept[p.piece()] = p.records();
    ReleaseReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    const auto& pieces = job.epochs.at(request.epoch()).pieces;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const PieceState& p = pieces[i];
      if (p.status != PieceStatus::kLeased || p.worker != request.worker() ||
          p.lane % job.spec.consumers() != request.consumer())
        continue;
      const int64_t piece = static_cast<int64_t>(i);
      record(state_.release(job.id, request.epoch(), piece, p.lease,
                            kept.count(piece) ? kept[piece] : p.from));
      reply.set_released(reply.released() + 1);
    }
    return reply.SerializeAsString();
  }

  // A consumer starts an epoch, from its beginning or a saved state's positions: its next
  // incarnation, journaled as a Rewind (its leases void, its pieces DONE or PENDING from
  // the records kept).
  std::string rewind(std::string_view bytes) {
    const auto request = parse_request<RewindRequest>(bytes, kRewind);
    check_hello(request.hello(), "(job " + std::to_string(request.job()) + ")", "dispatcher");
    std::lock_guard lock(mu_);
    const JobState& job = state_.job(request.job());
    open_epoch(job, request.epoch());
    const std::vector<PiecePos> pos(request.pos().begin(), request.pos().end());
    const int32_t consumer = request.consumer();
    const int64_t incarnation =
        consumer >= 0 && static_cast<size_t>(consumer) < job.incarnations.size()
            ? job.incarnations[static_cast<size_t>(consumer)] + 1
            : 1;
    record(state_.rewind(job.id, consumer, incarnation, request.epoch(), pos));
    RewindReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    reply.set_incarnation(incarnation);
    for (const PieceState& p : job.epochs.at(request.epoch()).pieces) reply.add_piece_lane(p.lane);
    return reply.SerializeAsString();
  }

  const int64_t worker_timeout_ms_;
  const PlanFn plan_fn_;
  std::map<int64_t, std::shared_ptr<const JobPlan>> plans_;  // by job
  std::mutex mu_;
  DispatcherState state_;
  std::vector<std::string> warnings_;
  std::unique_ptr<Journal> journal_;
  std::map<int64_t, WorkerInfo> info_;  // what beats say (not journaled)
  std::map<int64_t, Life> life_;        // the same, and StopWorker's orders
  std::unique_ptr<Server> server_;
  std::unique_ptr<Launcher> launcher_;
  std::mutex launch_mu_;
  std::unique_ptr<LaunchLoop> launch_loop_;  // from the first SetWorkers; stopped first
};

}  // namespace

std::unique_ptr<Dispatcher> start_dispatcher(const DispatcherOptions& options) {
  return std::make_unique<DispatcherImpl>(options);
}

}  // namespace dataecho::service
