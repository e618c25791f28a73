// Why this file is long: the consumer's iterator keeps its ledger, its queue, static's
// streams per lane and the cut-and-release path under one lock, which one class holds.
// The trainer's side of the data service: the `service` source. Its iterator (one per
// epoch) gets or creates the job at the dispatcher, waiting for the dispatcher and for a
// first worker up to connect_timeout_s, then reads a Read stream of every worker the
// dispatcher listed, on a thread per stream, into one queue bounded in bytes
// (buffer_mb): a full queue stops the readers, whose streams' flow control stops the
// workers. The epoch ends when every stream has ended. A worker's error, or (sharding
// "off") a stream that breaks, is thrown by next() naming the worker.
// In sharding "dynamic" each stream carries this consumer's pieces, leased by the worker
// one after another, and the consumer keeps a ledger per piece (I2): an element is kept
// only under the piece's newest lease, at a record after the last one kept; PIECE_DONE
// is reported to the dispatcher. A stream that breaks is cancelled, then its worker's
// leases are released at the records kept (I3), and another worker's stream goes on
// from there; the epoch ends when the dispatcher says the lanes' pieces are done (a
// stream ends normally) and every stream has ended.
// In "dynamic" and "static", a stream the transport cut (the network dropped; not a
// worker's error, not a refused token) is reopened once the dispatcher lists its worker
// alive, after a backoff per worker (0.5 s, doubled at each cut up to 4 s), as the next
// of the consumer's streams from it: the dispatcher closed the cut one at the release,
// so whatever of it the worker still runs gets no more pieces. With no stream running
// and pieces left, the epoch fails, naming each worker's last cut, only once
// connect_timeout_s has passed since a stream last delivered.
// In sharding "static" the consumer reads a stream per lane (its lanes dealt to the
// workers listed, those of a cut worker placed on others, and all dealt again when a
// worker joins mid-epoch), each lane's pieces one at a
// time in piece order, and returns its pieces' elements in its fixed order (StaticMerge:
// its lanes round robin, piece by piece), whichever worker computed them; a state keeps
// the position in that order, not elements.
// Each epoch's iterator starts as a new incarnation of its consumer (a Rewind): from the
// epoch's beginning, or from a restored state's ledger, whose queued elements come first.
// The epoch an iterator reads is the options' `epoch` (the trainer's side sets it per
// epoch: Python's for_epoch) plus its context's (a repeat after the source); its
// elements' rows carry it.
// save() keeps the ledger and the queue by content (sharding "off" keeps no position and
// refuses it).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "dataecho/core/tuner.h"
#include "dataecho/service/service.h"
#include "service/calls.h"
#include "service/dispatcher_state.h"
#include "service/frame.h"
#include "service/static_merge.h"

namespace dataecho::service {
namespace {

constexpr int64_t kWaitMs = 100;  // how often a waiting next() looks at the cancellation
constexpr const char* kStateFormat = "dataecho-service/1";  // a saved state's header

const Caller kConsumer{"consumer", "the spec's token_file"};
using Clock = std::chrono::steady_clock;

// The consumer's streams from one worker in an epoch (sharding "dynamic" and "static").
struct Link {
  int64_t stream = 0;   // the current one's number (ReadRequest.stream)
  bool cut = false;     // the current one was cut
  bool reopen = false;  // ... by the transport: the next one is opened from retry_at
  Clock::time_point retry_at;
  int64_t backoff_ms = 0;
};
// A stream: its worker and its number among the consumer's streams from that worker in
// the epoch (ReadRequest.stream).
struct Who {
  int64_t worker = 0;
  int64_t stream = 0;
};

class ServiceIterator final : public Iterator {
 public:
  ServiceIterator(const ServiceSourceOptions& o, const IteratorContext& ctx)
      : o_(o),
        transport_(o.transport ? o.transport : default_transport()),
        epoch_(o.epoch + ctx.epoch),
        cancel_(ctx.cancel) {}
  ~ServiceIterator() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      for (const auto& [s, worker] : streams_) s->cancel();
      cv_.notify_all();
    }
    for (auto& t : readers_) t.join();
  }

  // Sharding "dynamic": a JSON header (the job, this consumer, the epoch and the ledger:
  // the records kept of each piece, and the pieces done), then the queued elements by
  // content. Taken under the queue's lock, so the two agree.
  // Sharding "static" keeps no element: its order is fixed, so its position (the pieces
  // returned, and the records returned of the next one) says what comes next.
  void save(StateWriter& w) override {
    if (!pieces()) refuse_state();
    std::lock_guard lock(mu_);
    if (!error_.empty())
      throw Error(ErrorCode::kInvalidArgument, label(), "cannot save a source that has failed");
    w.begin("service");
    w.write_string(state_header().dump());
    w.write_u64(queue_.size());
    for (const auto& [e, bytes] : queue_) w.write_example(e);
  }
  // The ledger and the queue of a saved state; the positions go to the dispatcher as this
  // consumer's rewind when the iterator starts, and the queued elements come first.
  void restore(StateReader& r) override {
    if (!pieces()) refuse_state();
    r.expect("service");
    const std::string text = r.read_string();
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kDataLoss, label(),
                  "the saved state's header is not JSON: " + std::string(e.what()));
    }
    check_header(header);
    std::lock_guard lock(mu_);
    ledger_.clear();
    for (const auto& [piece, records] : header["lane_state"]["piece_records"].items())
      ledger_[std::stoll(piece)].kept = records.get<int64_t>();
    for (const auto& piece : header["lane_state"]["done_pieces"])
      ledger_[piece.get<int64_t>()].done = true;
    queue_.clear();
    queued_bytes_ = 0;
    for (uint64_t n = r.read_u64(); n > 0; --n) {
      Example e = r.read_example();
      const size_t bytes = e.nbytes();
      queue_.emplace_back(std::move(e), bytes);
      queued_bytes_ += bytes;
    }
  }

 protected:
  std::optional<Example> next_impl() override {
    if (!started_) {
      start();  // throws when the job or its workers cannot be had; the next call tries again
      started_ = true;
    }
    std::unique_lock lock(mu_);
    for (;;) {
      if (!error_.empty()) throw Error(error_code_, label(), error_);
      if (is_static()) {
        Example e;
        const auto took = merge_.take([&](int64_t piece) { return ledger_[piece].done; }, e);
        if (took == StaticMerge::Take::kEnd) return end_epoch();
        if (took == StaticMerge::Take::kElement) {
          cv_.notify_all();
          if (epoch_ > 0) e.stamp_epoch(static_cast<int32_t>(epoch_));
          return e;
        }
        cv_.notify_all();  // the turn may have passed to a piece whose reader waits for room
      } else if (!queue_.empty()) {
        Example e = std::move(queue_.front().first);
        queued_bytes_ -= queue_.front().second;
        queue_.pop_front();
        cv_.notify_all();
        if (epoch_ > 0) e.stamp_epoch(static_cast<int32_t>(epoch_));
        return e;
      }
      if (running_ == 0 && (!pieces() || (!is_static() && lanes_done_))) return end_epoch();
      if (running_ == 0 && gave_up()) {
        end_epoch();
        throw Error(ErrorCode::kIo, label(), broken_epoch());
      }
      if (cancel_ && cancel_->cancelled())
        throw Error(ErrorCode::kCancelled, label(), "the pipeline was cancelled");
      cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs));
    }
  }

 private:
  std::string broken_epoch() const {
    std::ostringstream s;
    s << "every worker's stream of epoch " << epoch_
      << " ended before its pieces were done, and none was reopened within " << o_.connect_timeout_s
      << " s (connect_timeout_s):";
    for (const auto& [worker, f] : failures_) s << "\n  " << f;
    return s.str();
  }

  // The epoch's end: the watcher stops. Under mu_.
  std::optional<Example> end_epoch() {
    ended_ = true;
    cv_.notify_all();
    return std::nullopt;
  }

  // With no stream running and pieces left (under mu_): whether connect_timeout_s has
  // passed since the last stream that delivered ended, while the watcher reopens cut
  // streams and places waiting lanes on the workers the dispatcher lists.
  bool gave_up() {
    if (!idle_since_) idle_since_ = Clock::now();
    return Clock::now() - *idle_since_ >=
           std::chrono::milliseconds(static_cast<int64_t>(o_.connect_timeout_s * 1000));
  }

  [[noreturn]] void refuse_state() const {
    throw Error(ErrorCode::kInvalidArgument, label(),
                "a service source in sharding \"off\" keeps no position, so its state cannot be "
                "saved or restored (a resume restarts the workers' passes; sharding "
                "\"dynamic\" and \"static\" resume exactly)");
  }

  // Under mu_.
  nlohmann::json state_header() const {
    nlohmann::json records = nlohmann::json::object(), done = nlohmann::json::array();
    for (const auto& [piece, p] : ledger_) {
      if (p.done)
        done.push_back(piece);
      else if (p.kept > 0)
        records[std::to_string(piece)] = p.kept;
    }
    const nlohmann::json lane_state =
        is_static() && merge_.started()
            ? merge_.lane_state()
            : nlohmann::json{{"piece_records", records}, {"done_pieces", done}};
    return {{"format", kStateFormat},  {"job", o_.job},     {"fingerprint", o_.fingerprint},
            {"sharding", o_.sharding}, {"lanes", o_.lanes}, {"consumers", o_.consumers},
            {"consumer", o_.consumer}, {"epoch", epoch_},   {"lane_state", lane_state}};
  }

  // A saved state resumes the same consumer of the same job, epoch and consumer count.
  void check_header(const nlohmann::json& h) const {
    const auto refuse = [&](const std::string& what) {
      throw Error(ErrorCode::kInvalidArgument, label(), "the saved state " + what);
    };
    if (!h.is_object() || h.value("format", "") != kStateFormat)
      refuse("is not a service source's (\"" + std::string(kStateFormat) + "\")");
    if (h.value("job", "") != o_.job || h.value("fingerprint", "") != o_.fingerprint)
      refuse("is of job '" + h.value("job", "") + "' (upstream " + h.value("fingerprint", "") +
             "), this source reads job '" + o_.job + "' (upstream " + o_.fingerprint + ")");
    if (h.value("sharding", "") != o_.sharding || h.value("lanes", 0) != o_.lanes)
      refuse("has sharding \"" + h.value("sharding", "") + "\" over " +
             std::to_string(h.value("lanes", 0)) + " lanes, this source \"" + o_.sharding +
             "\" over " + std::to_string(o_.lanes));
    if (h.value("consumers", 0) != o_.consumers || h.value("consumer", -1) != o_.consumer)
      refuse("is consumer " + std::to_string(h.value("consumer", -1)) + " of " +
             std::to_string(h.value("consumers", 0)) + ", this source consumer " +
             std::to_string(o_.consumer) + " of " + std::to_string(o_.consumers) +
             ": a state resumes the same consumer of as many (the same rank and world size)");
    if (h.value("epoch", int64_t{-1}) != epoch_)
      refuse("is of epoch " + std::to_string(h.value("epoch", int64_t{-1})) +
             ", this iterator reads epoch " + std::to_string(epoch_));
    if (!h.contains("lane_state") || !h["lane_state"].contains("piece_records") ||
        !h["lane_state"].contains("done_pieces"))
      refuse("has no lane_state with piece_records and done_pieces");
  }

  JobSpec job_spec() const {
    JobSpec spec;
    spec.set_name(o_.job);
    spec.set_upstream_json(o_.upstream_json);
    spec.set_fingerprint(o_.fingerprint);
    spec.set_sharding(is_static() ? JobSpec::STATIC : dynamic() ? JobSpec::DYNAMIC : JobSpec::OFF);
    spec.set_lanes(pieces() ? o_.lanes : 1);
    spec.set_consumers(pieces() ? o_.consumers : 1);
    return spec;
  }
  bool dynamic() const { return o_.sharding == "dynamic"; }
  bool is_static() const { return o_.sharding == "static"; }
  bool pieces() const { return dynamic() || is_static(); }  // leased pieces, a ledger

  // The job and its workers from the dispatcher; waits for a first worker.
  JobReply get_job() {
    const auto end =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.connect_timeout_s * 1000));
    auto channel = transport_->open_channel(o_.dispatcher, client_transport(o_.tls));
    JobRequest request;
    *request.mutable_spec() = job_spec();
    for (;;) {
      JobReply reply;
      retry_unreachable_until(
          end, o_.connect_timeout_s, o_.dispatcher,
          [&](int64_t ms) {
            reply = call_unary<JobRequest, JobReply>(*channel, kGetOrCreateJob, request,
                                                     {.deadline_ms = ms, .token = o_.token},
                                                     kConsumer, "dispatcher");
          },
          [&] { return cancel_ && cancel_->cancelled(); });
      if (reply.workers_size() > 0) return reply;
      if (Clock::now() + std::chrono::milliseconds(200) >= end) {
        std::ostringstream s;
        s << "no worker has joined the dispatcher at " << o_.dispatcher << " within "
          << o_.connect_timeout_s << " s (start one: dataecho worker --dispatcher " << o_.dispatcher
          << ")";
        throw Error(ErrorCode::kIo, label(), s.str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  void start() {
    JobReply reply;
    try {
      reply = get_job();
    } catch (const CallError& e) {
      throw Error(
          ErrorCode::kInvalidArgument, label(),
          "the dispatcher at " + o_.dispatcher + " refused job '" + o_.job + "': " + e.detail());
    }
    RewindReply rewound;
    if (pieces()) rewound = rewind(reply.job());
    incarnation_ = rewound.incarnation();
    std::lock_guard lock(mu_);
    running_ = 0;
    if (is_static()) return start_lanes(reply, rewound);
    for (const WorkerInfo& w : reply.workers()) start_reader(w, reply.job());
    if (dynamic()) readers_.emplace_back([this, job = reply.job()] { watch_workers(job); });
  }

  // Sharding "static": the epoch's order, from the deal the rewind gave, and a stream per
  // lane of this consumer, the lanes dealt to the workers listed. Under mu_.
  void start_lanes(const JobReply& reply, const RewindReply& rewound) {
    const std::vector<int32_t> deal(rewound.piece_lane().begin(), rewound.piece_lane().end());
    if (deal.empty())
      throw Error(ErrorCode::kIo, label(),
                  "the dispatcher at " + o_.dispatcher + " gave no deal of epoch " +
                      std::to_string(epoch_) + " (a dispatcher without sharding \"static\"?)");
    const auto found = [this](int64_t piece) {
      const auto it = ledger_.find(piece);
      return it == ledger_.end() ? nullptr : &it->second;
    };
    merge_.start(
        static_order(deal, o_.consumers, o_.consumer),
        [&](int64_t piece) { return found(piece) != nullptr && found(piece)->done; },
        [&](int64_t piece) { return found(piece) != nullptr ? found(piece)->kept : 0; });
    alive_.assign(reply.workers().begin(), reply.workers().end());
    for (int32_t lane = o_.consumer; lane < o_.lanes; lane += o_.consumers)
      place_lane(lane, reply.job());
    readers_.emplace_back([this, job = reply.job()] { watch_workers(job); });
  }

  // Sharding "static": a stream of `lane` from the worker listed alive and not cut in this
  // epoch that reads the fewest of this consumer's lanes; with none, the lane waits for
  // the watcher to list one. Under mu_.
  void place_lane(int32_t lane, int64_t job) {
    const WorkerInfo* best = nullptr;
    std::ptrdiff_t fewest = 0;
    for (const WorkerInfo& w : alive_) {
      if (links_[w.worker()].cut) continue;
      const auto n = lanes_of(w.worker());
      if (best == nullptr || n < fewest) {
        best = &w;
        fewest = n;
      }
    }
    lane_workers_[lane] = best != nullptr ? best->worker() : 0;  // 0: waiting
    if (best == nullptr || stopping_) return;
    dealt_.insert(best->worker());
    ++running_;
    const Who who{best->worker(), links_[best->worker()].stream};
    readers_.emplace_back([this, lane, w = *best, job, who] { read_worker(w, who, job, lane); });
  }

  // Sharding "static": the lanes not yet ended that wait for a worker, or whose worker was
  // cut. Under mu_.
  void place_waiting(int64_t job) {
    std::vector<int32_t> lanes;
    for (const auto& [lane, worker] : lane_workers_)
      if (!lanes_ended_.count(lane) && (worker == 0 || links_[worker].cut)) lanes.push_back(lane);
    for (int32_t lane : lanes) place_lane(lane, job);
  }

  // Sharding "static": how many of this consumer's lanes not yet ended `worker` reads.
  // Under mu_.
  std::ptrdiff_t lanes_of(int64_t worker) const {
    return std::count_if(lane_workers_.begin(), lane_workers_.end(), [&](const auto& l) {
      return l.second == worker && !lanes_ended_.count(l.first);
    });
  }

  // Sharding "static": whether a worker listed has joined in this epoch (none of its
  // lanes dealt to it, and never cut in it) while another reads two lanes not yet ended or
  // more, so that dealing them again gives it some. (A worker cut in this epoch gets lanes
  // only where a cut places them: one that the network keeps cutting does not pull lanes
  // back and forth.) Under mu_.
  bool joined_idle() const {
    bool idle = false;
    std::ptrdiff_t most = 0;
    for (const WorkerInfo& w : alive_) {
      const auto it = links_.find(w.worker());
      if (it != links_.end() && it->second.cut) continue;
      most = std::max(most, lanes_of(w.worker()));
      idle = idle || (!dealt_.count(w.worker()) && !failures_.count(w.worker()));
    }
    return idle && most >= 2;
  }

  // Sharding "static": a worker that joins mid-epoch gets lanes at once. The streams of
  // every worker listed that reads lanes not yet ended are cancelled and their leases
  // released at the records kept, as a cut's are, so that each lane goes on from where it
  // was and the order does not change; then each of those workers' next stream opens at
  // once (no backoff: nothing failed), and the lanes are dealt again over the workers
  // listed, the fewest first, as at the epoch's start. Not under mu_.
  void rebalance(int64_t job) {
    std::vector<std::pair<Who, ReleaseRequest>> moved;
    std::ptrdiff_t lanes = 0;
    {
      std::lock_guard lock(mu_);
      if (stopping_ || !joined_idle()) return;
      for (const WorkerInfo& w : alive_) {
        const Link& l = links_[w.worker()];
        const auto n = lanes_of(w.worker());
        if (l.cut || n == 0) continue;
        lanes += n;
        const Who who{w.worker(), l.stream};
        moved.emplace_back(who, sever_locked(job, who));
      }
    }
    int32_t released = 0;
    for (const auto& [who, request] : moved) {
      const std::optional<int32_t> r = release(request);
      if (!r) return;
      released += *r;
    }
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (const auto& [who, request] : moved) {
      Link& l = links_[who.worker];
      if (l.stream != who.stream || !l.cut) continue;
      ++l.stream;
      l.cut = l.reopen = false;
      for (auto& [lane, worker] : lane_workers_)
        if (worker == who.worker) worker = 0;
    }
    place_waiting(job);
    std::cerr << "service: a worker joined mid-epoch: the " << lanes
              << " lanes not yet ended are dealt again over the " << alive_.size()
              << " workers listed (epoch " << epoch_
              << "); leases released at the records kept: " << released << "\n";
  }

  // A stream from worker `w`, read on a thread of its own, unless this epoch reads from it
  // already (or its stream was cut and is not due to be reopened). Under mu_.
  void start_reader(const WorkerInfo& w, int64_t job) {
    const auto [it, added] = links_.try_emplace(w.worker());
    if (!added && !reopen(w)) return;
    ++running_;
    const Who who{w.worker(), it->second.stream};
    readers_.emplace_back([this, w, job, who] { read_worker(w, who, job); });
  }

  // A worker whose stream the transport cut, listed alive again by the dispatcher, gets
  // a new stream (the next number, which the dispatcher has not closed) once its backoff
  // has passed. Under mu_.
  bool reopen(const WorkerInfo& w) {
    Link& l = links_[w.worker()];
    if (!l.cut || !l.reopen || Clock::now() < l.retry_at) return false;
    ++l.stream;
    l.cut = l.reopen = false;
    std::cerr << "service: worker w" << w.worker() << " (" << w.address()
              << "): stream reopened (stream " << l.stream << " of epoch " << epoch_ << ")\n";
    return true;
  }

  // Sharding "dynamic": workers that join during the epoch, and those whose stream the
  // transport cut. Twice a second the job's workers are asked of the dispatcher
  // (GetOrCreateJob lists those alive and not leaving), and a stream is opened to each
  // one this epoch has not read from, or reopened to one cut once its backoff passed,
  // while the epoch runs; it takes pending pieces as the others do. Sharding "static":
  // the workers cut are taken back (after their backoff), the lanes waiting for a
  // worker are placed on those listed, and a worker that joined gets lanes (rebalance).
  // Runs as one of readers_ (not counted in
  // running_) until the epoch ends, adding readers only while not stopping, so that the
  // destructor joins them all.
  void watch_workers(int64_t job) {
    constexpr int64_t kWatchMs = 500;
    auto channel = transport_->open_channel(o_.dispatcher, client_transport(o_.tls));
    JobRequest request;
    *request.mutable_spec() = job_spec();
    std::unique_lock lock(mu_);
    const auto over = [&] { return stopping_ || lanes_done_ || ended_ || !error_.empty(); };
    while (!cv_.wait_for(lock, std::chrono::milliseconds(kWatchMs), over)) {
      lock.unlock();
      JobReply reply;
      try {
        reply = call_unary<JobRequest, JobReply>(*channel, kGetOrCreateJob, request,
                                                 {.deadline_ms = 2'000, .token = o_.token},
                                                 kConsumer, "dispatcher");
      } catch (const std::exception&) {  // the dispatcher down (restarting): asked again later
      }
      lock.lock();
      if (over() || reply.job() != job) continue;
      if (is_static()) {
        alive_.assign(reply.workers().begin(), reply.workers().end());
        for (const WorkerInfo& w : alive_) reopen(w);
        place_waiting(job);
        lock.unlock();
        rebalance(job);
        lock.lock();
      } else {
        for (const WorkerInfo& w : reply.workers()) start_reader(w, job);
      }
    }
  }

  // Sharding "dynamic": this consumer starts the epoch as a new incarnation, at the
  // ledger's positions (none: from the epoch's beginning); its older streams get no more
  // pieces, and its leases are void.
  RewindReply rewind(int64_t job) {
    RewindRequest request;
    request.set_job(job);
    request.set_consumer(o_.consumer);
    request.set_epoch(epoch_);
    {
      std::lock_guard lock(mu_);
      for (const auto& [piece, p] : ledger_) {
        PiecePos* pos = request.add_pos();
        pos->set_epoch(epoch_);
        pos->set_piece(piece);
        pos->set_records(p.kept);
        pos->set_done(p.done);
      }
    }
    auto channel = transport_->open_channel(o_.dispatcher, client_transport(o_.tls));
    return call_dispatcher<RewindRequest, RewindReply>(*channel, kRewind, request);
  }

  void fail(ErrorCode code, const std::string& message) {
    std::lock_guard lock(mu_);
    if (error_.empty() && !stopping_) {
      error_ = message;
      error_code_ = code;
    }
    cv_.notify_all();
  }

  // Queues an element, waiting while the queue holds buffer_mb (one element always fits).
  // False when stopping.
  bool push(Example&& e) {
    const size_t bytes = e.nbytes();
    const size_t limit = static_cast<size_t>(o_.buffer_mb) << 20;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopping_ || queue_.empty() || queued_bytes_ + bytes <= limit; });
    if (stopping_) return false;
    queue_.emplace_back(std::move(e), bytes);
    queued_bytes_ += bytes;
    cv_.notify_all();
    return true;
  }

  // Reads worker `w`'s stream `who.stream` of this epoch (static: of `lane`) until it ends.
  // A stream cut by the transport is reopened by the watcher; one cut for a damaged frame
  // is not.
  void read_worker(const WorkerInfo& w, Who who, int64_t job, int32_t lane = 0) {
    const std::string peer = "worker w" + std::to_string(w.worker()) + " (" + w.address() + ")";
    std::unique_ptr<ClientStream> stream;
    try {
      auto channel = transport_->open_channel(w.address(), client_transport(o_.tls));
      ReadRequest request;
      *request.mutable_hello() = make_hello(kConsumer.role);
      request.set_job(job);
      *request.mutable_spec() = job_spec();
      request.set_epoch(epoch_);
      request.set_consumer(o_.consumer);
      request.set_incarnation(incarnation_);
      if (is_static()) request.set_lane(lane);
      request.set_stream(who.stream);
      stream = channel->stream(kRead, request.SerializeAsString(), {.token = o_.token});
      if (!watch(stream.get(), w.worker())) return finish(nullptr);
      if (pieces())
        read_pieces(*stream, peer, job, who, lane);
      else
        read_frames(*stream, peer);
    } catch (const CallError& e) {
      if (e.call_code() == CallCode::kUnauthenticated)
        fail(ErrorCode::kInvalidArgument,
             token_refusal(kConsumer, "worker", w.address(), !o_.token.empty()));
      else if (pieces())
        cut(stream.get(), peer + ": " + e.detail(), job, who, true);
      else
        fail(ErrorCode::kIo, peer + ": " + e.detail());
    } catch (const Error& e) {
      // A damaged frame or a broken rule; or (static) any end of a worker cut already.
      if (pieces() && (e.code() == ErrorCode::kDataLoss || severed(who)))
        cut(stream.get(), e.message(), job, who, false);
      else
        fail(e.code(), e.message());  // a frame's error names the peer
    }
    finish(stream.get());
  }

  // Sharding "dynamic": the stream's frames, kept under the ledger's rules (I2). Returns
  // at the stream's end (the lanes' pieces all done) or a worker's error; throws
  // Error(kDataLoss) for a frame that breaks a rule.
  void read_pieces(ClientStream& stream, const std::string& peer, int64_t job, Who who,
                   int32_t lane) {
    auto dispatcher = transport_->open_channel(o_.dispatcher, client_transport(o_.tls));
    FrameReader reader(peer);
    Frame frame;
    while (stream.next(frame) == ClientStream::Next::kFrame) {
      FrameContent content = reader.read(frame);
      const FrameHeader& h = content.header;
      if (h.kind == FrameKind::kError)
        return fail(ErrorCode::kInvalidArgument, peer + " " + content.message);
      if (h.kind == FrameKind::kElements) {
        for (FrameElement& e : content.elements)
          if (!keep(h, e, peer, who)) return;
      } else if (h.kind == FrameKind::kPieceDone) {
        piece_done(*dispatcher, h, content.records, peer, job, who);
      }
    }
    std::lock_guard lock(mu_);
    if (!is_static())
      lanes_done_ = true;
    else if (!severed_locked(who))
      lanes_ended_.insert(lane);  // this lane's pieces are done
  }

  // What the consumer has of a piece.
  struct PieceLedger {
    int64_t lease = 0;  // the newest lease a frame came under
    int64_t kept = 0;   // records whose elements are queued (or done: the piece's length)
    bool done = false;
  };
  // The piece's ledger entry for a frame of header `h` (under mu_): refused when the piece
  // is done or a newer lease holds it; a newer lease becomes the piece's.
  PieceLedger& ledger_entry(const FrameHeader& h, const std::string& peer) {
    PieceLedger& p = ledger_[h.piece];
    const std::string piece = peer + ": piece " + std::to_string(h.piece) + " of epoch " +
                              std::to_string(h.epoch) + ", lease " + std::to_string(h.lease);
    if (p.done) throw Error(ErrorCode::kDataLoss, label(), piece + ": the piece is done already");
    if (h.lease < p.lease)
      throw Error(ErrorCode::kDataLoss, label(),
                  piece + ": a newer lease " + std::to_string(p.lease) + " holds it");
    p.lease = h.lease;
    return p;
  }

  // Queues an element under the ledger's rule, waiting while the queue is full. False
  // when stopping.
  // Static: into the piece's buffer, while the merge admits it; nothing of a worker cut
  // already (its lanes moved to other workers).
  bool keep(const FrameHeader& h, FrameElement& e, const std::string& peer, Who who) {
    const size_t bytes = e.example.nbytes();
    const size_t limit = static_cast<size_t>(o_.buffer_mb) << 20;
    std::unique_lock lock(mu_);
    const auto room = [&] {
      return is_static() ? merge_.admits(h.piece, bytes, limit)
                         : queue_.empty() || queued_bytes_ + bytes <= limit;
    };
    cv_.wait(lock, [&] { return stopping_ || severed_locked(who) || room(); });
    if (stopping_ || severed_locked(who)) return false;
    idle_since_.reset();
    PieceLedger& p = ledger_entry(h, peer);
    if (e.record < p.kept)
      throw Error(ErrorCode::kDataLoss, label(),
                  peer + ": piece " + std::to_string(h.piece) + " record " +
                      std::to_string(e.record) + " under lease " + std::to_string(h.lease) +
                      ", but records up to " + std::to_string(p.kept) + " are kept already");
    p.kept = e.record + 1;
    if (is_static()) {
      merge_.add(h.piece, e.record, std::move(e.example), bytes);
    } else {
      queue_.emplace_back(std::move(e.example), bytes);
      queued_bytes_ += bytes;
    }
    cv_.notify_all();
    return true;
  }

  void piece_done(Channel& dispatcher, const FrameHeader& h, int64_t records,
                  const std::string& peer, int64_t job, Who who) {
    {
      std::lock_guard lock(mu_);
      if (severed_locked(who)) return;  // released already, read elsewhere
      idle_since_.reset();
      PieceLedger& p = ledger_entry(h, peer);
      if (records < p.kept)
        throw Error(ErrorCode::kDataLoss, label(),
                    peer + ": piece " + std::to_string(h.piece) + " done at " +
                        std::to_string(records) + " records, but " + std::to_string(p.kept) +
                        " are kept");
      p.kept = records;
    }
    PieceDoneRequest request;
    request.set_job(job);
    PiecePos* pos = request.mutable_pos();
    pos->set_epoch(h.epoch);
    pos->set_piece(h.piece);
    pos->set_lease(h.lease);
    pos->set_records(records);
    pos->set_done(true);
    call_dispatcher<PieceDoneRequest, PieceDoneReply>(dispatcher, kPieceDone, request);
    std::lock_guard lock(mu_);
    ledger_[h.piece].done = true;
    cv_.notify_all();  // static: the piece's turn may end
  }

  // A unary call to the dispatcher, tried again while it cannot be reached (restarted on
  // its journal) for connect_timeout_s; its failure is an Error (kIo) naming it.
  template <class Request, class Reply>
  Reply call_dispatcher(Channel& channel, const std::string& method, const Request& request) {
    Reply reply;
    try {
      retry_unreachable(
          o_.connect_timeout_s, o_.dispatcher,
          [&](int64_t ms) {
            reply = call_unary<Request, Reply>(
                channel, method, request,
                {.deadline_ms = std::min<int64_t>(ms, 10'000), .token = o_.token}, kConsumer,
                "dispatcher");
          },
          [&] { return stopping(); });
    } catch (const CallError& e) {
      throw Error(ErrorCode::kIo, label(),
                  "the dispatcher at " + o_.dispatcher + " (" + method + "): " + e.detail());
    } catch (const Error& e) {
      throw Error(e.code(), label(), e.message() + " (" + method + ")");
    }
    return reply;
  }
  bool stopping() {
    std::lock_guard lock(mu_);
    return stopping_;
  }
  // Whether stream `who` was cut (or a later one of its worker opened).
  bool severed(Who who) {
    std::lock_guard lock(mu_);
    return severed_locked(who);
  }
  bool severed_locked(Who who) {  // under mu_
    const Link& l = links_[who.worker];
    return l.cut || l.stream != who.stream;
  }

  // A broken stream (I3): cancelled (static: with every stream of its worker), then its
  // worker's leases released at the records kept, which closes the stream at the
  // dispatcher; the other workers' streams take the pieces on (static: the worker's
  // lanes are placed on other workers). Once per stream. One the transport cut
  // (`transport`) is reopened by the watcher after the worker's backoff: 0.5 s, doubled
  // at each cut up to 4 s.
  void cut(ClientStream* stream, const std::string& why, int64_t job, Who who, bool transport) {
    if (stream != nullptr) stream->cancel();
    ReleaseRequest request;
    {
      std::lock_guard lock(mu_);
      if (stopping_ || severed_locked(who)) return;
      failures_[who.worker] = why;
      request = sever_locked(job, who);
    }
    const std::optional<int32_t> released = release(request);
    if (!released) return;
    std::cerr << "service: " << why
              << ": stream cut; leases released at the records kept: " << *released << "\n";
    std::lock_guard lock(mu_);
    if (transport) back_off(links_[who.worker]);
    if (is_static() && !stopping_) place_waiting(job);
  }

  // Marks stream `who` cut, cancels every stream of its worker, and gives the Release of
  // the worker's leases at the records kept (the ledger). Under mu_.
  ReleaseRequest sever_locked(int64_t job, Who who) {
    ReleaseRequest request;
    request.set_job(job);
    request.set_consumer(o_.consumer);
    request.set_epoch(epoch_);
    request.set_worker(who.worker);
    request.set_incarnation(incarnation_);
    request.set_stream(who.stream);
    links_[who.worker].cut = true;
    for (const auto& [s, w] : streams_)
      if (w == who.worker) s->cancel();
    cv_.notify_all();  // its readers waiting for room give up
    for (const auto& [piece, p] : ledger_) {
      if (p.done) continue;
      PiecePos* pos = request.add_kept();
      pos->set_epoch(epoch_);
      pos->set_piece(piece);
      pos->set_records(p.kept);
    }
    return request;
  }

  // The Release at the dispatcher: how many leases it released; none when it failed (the
  // epoch then fails naming it).
  std::optional<int32_t> release(const ReleaseRequest& request) {
    try {
      auto channel = transport_->open_channel(o_.dispatcher, client_transport(o_.tls));
      return call_dispatcher<ReleaseRequest, ReleaseReply>(*channel, kRelease, request).released();
    } catch (const Error& e) {
      fail(e.code(), e.message());
      return std::nullopt;
    }
  }

  // The time a cut stream is reopened at, at the earliest. Under mu_.
  static void back_off(Link& l) {
    constexpr int64_t kFirstMs = 500, kMostMs = 4'000;
    l.backoff_ms = l.backoff_ms == 0 ? kFirstMs : std::min(2 * l.backoff_ms, kMostMs);
    l.retry_at = Clock::now() + std::chrono::milliseconds(l.backoff_ms);
    l.reopen = true;
  }

  void read_frames(ClientStream& stream, const std::string& peer) {
    FrameReader reader(peer);
    Frame frame;
    while (stream.next(frame) == ClientStream::Next::kFrame) {
      FrameContent content = reader.read(frame);
      if (content.header.kind == FrameKind::kError)
        return fail(ErrorCode::kInvalidArgument, peer + " " + content.message);
      for (FrameElement& e : content.elements)
        if (!push(std::move(e.example))) return;
    }
  }

  // Lists a stream (of `worker`) for cancelling; false when stopping already.
  bool watch(ClientStream* s, int64_t worker) {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    streams_[s] = worker;
    return true;
  }
  // A reader ended.
  void finish(ClientStream* s) {
    std::lock_guard lock(mu_);
    streams_.erase(s);
    if (--running_ == 0 && !idle_since_) idle_since_ = Clock::now();
    cv_.notify_all();
  }

  const ServiceSourceOptions o_;
  std::shared_ptr<Transport> transport_;
  const int64_t epoch_;
  std::shared_ptr<CancellationToken> cancel_;
  bool started_ = false;
  int64_t incarnation_ = 0;  // dynamic: this consumer's, from its rewind
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Example, size_t>> queue_;
  size_t queued_bytes_ = 0;
  int running_ = 0;  // readers not yet ended
  bool stopping_ = false;
  std::string error_;
  ErrorCode error_code_ = ErrorCode::kIo;
  std::map<ClientStream*, int64_t> streams_;  // the streams read, each its worker's
  std::vector<std::thread> readers_;
  std::map<int64_t, PieceLedger> ledger_;        // dynamic: by piece
  bool lanes_done_ = false;                      // dynamic: a stream ended normally
  std::map<int64_t, std::string> failures_;      // each worker's last stream cut, and why
  std::map<int64_t, Link> links_;                // the workers this epoch has read from
  bool ended_ = false;                           // next() saw the epoch's end
  std::optional<Clock::time_point> idle_since_;  // no stream running, none delivering
  StaticMerge merge_;                            // static: the order, the pieces' buffers
  std::map<int32_t, int64_t> lane_workers_;      // static: each lane's worker (0: waiting)
  std::set<int32_t> lanes_ended_;                // static: lanes whose pieces are all done
  std::set<int64_t> dealt_;                      // static: workers dealt a lane in this epoch
  std::vector<WorkerInfo> alive_;                // static: the workers listed last
};

class ServiceDataset final : public Dataset {
 public:
  explicit ServiceDataset(ServiceSourceOptions o) : o_(std::move(o)) {}
  std::string op_name() const override { return "service"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    if (o_.scale && ctx.tuner) ctx.tuner->add_scaler(o_.scale, node_stats());
    return std::make_unique<ServiceIterator>(o_, ctx);
  }

 private:
  const ServiceSourceOptions o_;
};

}  // namespace

DatasetPtr make_service_source(ServiceSourceOptions options) {
  return std::make_shared<ServiceDataset>(std::move(options));
}

}  // namespace dataecho::service
