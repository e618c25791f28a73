// The dispatcher: jobs and workers (dispatcher_state.h), journaled when given a folder
// (journal.h), served over the transport's unary calls:
// - GetOrCreateJob: a consumer's job by name and upstream fingerprint, made on first
//   use; another fingerprint under a running job's name is refused;
// - WorkerBeat: registers a worker (its number given at its first beat) and lists the
//   jobs it serves;
// - Status: jobs and workers, for `dataecho service status`;
// - StopJob: `dataecho service stop-job`: the job's name is free again.
// Every request's Hello is checked (protocol.h). One lock over the state: the calls are
// small and few (a beat per worker every half second).
#include <chrono>
#include <mutex>

#include "dataecho/service/service.h"
#include "service/calls.h"
#include "service/dispatcher_state.h"
#include "service/journal.h"

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
  explicit DispatcherImpl(const DispatcherOptions& o) : worker_timeout_ms_(o.worker_timeout_ms) {
    if (!o.journal_dir.empty())
      journal_ = std::make_unique<Journal>(o.journal_dir, state_, &warnings_);
    auto transport = o.transport ? o.transport : default_transport();
    Handlers h;
    h.unary = [this](const std::string& method, std::string_view request) {
      return serve_unary([&] { return handle(method, request); });
    };
    server_ = transport->start_server(o.bind + ":" + std::to_string(o.port), TransportOptions{},
                                      o.token, std::move(h));
  }
  ~DispatcherImpl() override { stop(); }

  int port() const override { return server_->port(); }
  const std::vector<std::string>& journal_warnings() const override { return warnings_; }
  std::string journal_path() const override { return journal_ ? journal_->path() : ""; }
  void stop() override { server_->stop(0); }

 private:
  std::string handle(const std::string& method, std::string_view request) {
    if (method == kGetOrCreateJob) return get_or_create_job(request);
    if (method == kWorkerBeat) return worker_beat(request);
    if (method == kStatus) return status(request);
    if (method == kStopJob) return stop_job(request);
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
    return w;
  }

  std::string get_or_create_job(std::string_view bytes) {
    const auto request = parse_request<JobRequest>(bytes, kGetOrCreateJob);
    check_hello(request.hello(), consumer_name(request.spec()), "dispatcher");
    JobSpec spec = request.spec();
    if (spec.sharding() != JobSpec::OFF)
      throw CallError(CallCode::kInvalidArgument, "job '" + spec.name() + "': sharding \"" +
                                                      sharding_name(spec.sharding()) +
                                                      "\" is not available yet (only \"off\" is)");
    std::lock_guard lock(mu_);
    if (auto entry = state_.register_job(spec, "")) record(*entry);
    const JobState* job = state_.find_job(spec.name());
    JobReply reply;
    *reply.mutable_hello() = make_hello("dispatcher");
    reply.set_job(job->id);
    *reply.mutable_spec() = job->spec;
    const int64_t now = now_ms();
    for (const auto& [number, w] : state_.workers())
      if (w.last_beat_ms > 0 && now - w.last_beat_ms <= worker_timeout_ms_)
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
    WorkerOrders orders;
    *orders.mutable_hello() = make_hello("dispatcher");
    orders.set_worker(number);
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
    }
    const int64_t now = now_ms();
    for (const auto& [number, w] : state_.workers())
      if (w.last_beat_ms > 0) *reply.add_workers() = info_of(number, now);
    reply.set_journal(journal_path());
    reply.set_worker_timeout_ms(worker_timeout_ms_);
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

  const int64_t worker_timeout_ms_;
  std::mutex mu_;
  DispatcherState state_;
  std::vector<std::string> warnings_;
  std::unique_ptr<Journal> journal_;
  std::map<int64_t, WorkerInfo> info_;  // what beats say (not journaled)
  std::unique_ptr<Server> server_;
};

}  // namespace

std::unique_ptr<Dispatcher> start_dispatcher(const DispatcherOptions& options) {
  return std::make_unique<DispatcherImpl>(options);
}

}  // namespace dataecho::service
