// The trainer's side of the data service: the `service` source. Its iterator (one per
// epoch) gets or creates the job at the dispatcher, waiting for the dispatcher and for a
// first worker up to connect_timeout_s, then reads a Read stream of every worker the
// dispatcher listed, on a thread per stream, into one queue bounded in bytes
// (buffer_mb): a full queue stops the readers, whose streams' flow control stops the
// workers. The epoch ends when every stream has ended. A worker's error, or a stream that
// breaks, is thrown by next() naming the worker.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>

#include "dataecho/service/service.h"
#include "service/calls.h"
#include "service/frame.h"

namespace dataecho::service {
namespace {

constexpr int64_t kWaitMs = 100;  // how often a waiting next() looks at the cancellation

const Caller kConsumer{"consumer", "the spec's token_file"};

class ServiceIterator final : public Iterator {
 public:
  ServiceIterator(const ServiceSourceOptions& o, const IteratorContext& ctx)
      : o_(o),
        transport_(o.transport ? o.transport : default_transport()),
        epoch_(ctx.epoch),
        cancel_(ctx.cancel) {}
  ~ServiceIterator() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      for (ClientStream* s : streams_) s->cancel();
      cv_.notify_all();
    }
    for (auto& t : readers_) t.join();
  }

  void save(StateWriter&) override { refuse_state(); }
  void restore(StateReader&) override { refuse_state(); }

 protected:
  std::optional<Example> next_impl() override {
    if (!started_) {
      start();  // throws when the job or its workers cannot be had; the next call tries again
      started_ = true;
    }
    std::unique_lock lock(mu_);
    for (;;) {
      if (!error_.empty()) throw Error(error_code_, label(), error_);
      if (!queue_.empty()) {
        Example e = std::move(queue_.front().first);
        queued_bytes_ -= queue_.front().second;
        queue_.pop_front();
        cv_.notify_all();
        return e;
      }
      if (running_ == 0) return std::nullopt;
      if (cancel_ && cancel_->cancelled())
        throw Error(ErrorCode::kCancelled, label(), "the pipeline was cancelled");
      cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs));
    }
  }

 private:
  [[noreturn]] void refuse_state() const {
    throw Error(ErrorCode::kInvalidArgument, label(),
                "a service source in sharding \"off\" keeps no position, so its state cannot be "
                "saved or restored (a resume restarts the workers' passes)");
  }

  JobSpec job_spec() const {
    JobSpec spec;
    spec.set_name(o_.job);
    spec.set_upstream_json(o_.upstream_json);
    spec.set_fingerprint(o_.fingerprint);
    spec.set_sharding(JobSpec::OFF);
    spec.set_lanes(1);
    spec.set_consumers(1);
    return spec;
  }

  // The job and its workers from the dispatcher; waits for a first worker.
  JobReply get_job() {
    using Clock = std::chrono::steady_clock;
    const auto end =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.connect_timeout_s * 1000));
    auto channel = transport_->open_channel(o_.dispatcher);
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
    std::lock_guard lock(mu_);
    running_ = reply.workers_size();
    for (const WorkerInfo& w : reply.workers())
      readers_.emplace_back([this, w, job = reply.job()] { read_worker(w, job); });
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

  // Reads worker `w`'s stream of this epoch until it ends.
  void read_worker(const WorkerInfo& w, int64_t job) {
    const std::string peer = "worker w" + std::to_string(w.worker()) + " (" + w.address() + ")";
    std::unique_ptr<ClientStream> stream;
    try {
      auto channel = transport_->open_channel(w.address());
      ReadRequest request;
      *request.mutable_hello() = make_hello(kConsumer.role);
      request.set_job(job);
      *request.mutable_spec() = job_spec();
      request.set_epoch(epoch_);
      stream = channel->stream(kRead, request.SerializeAsString(), {.token = o_.token});
      if (!watch(stream.get())) return finish(nullptr);
      read_frames(*stream, peer);
    } catch (const CallError& e) {
      if (e.call_code() == CallCode::kUnauthenticated)
        fail(ErrorCode::kInvalidArgument,
             token_refusal(kConsumer, "worker", w.address(), !o_.token.empty()));
      else
        fail(ErrorCode::kIo, peer + ": " + e.detail());
    } catch (const Error& e) {
      fail(e.code(), e.message());  // a frame's error names the peer
    }
    finish(stream.get());
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

  // Lists a stream for cancelling; false when stopping already.
  bool watch(ClientStream* s) {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    streams_.push_back(s);
    return true;
  }
  // A reader ended.
  void finish(ClientStream* s) {
    std::lock_guard lock(mu_);
    std::erase(streams_, s);
    --running_;
    cv_.notify_all();
  }

  const ServiceSourceOptions o_;
  std::shared_ptr<Transport> transport_;
  const int64_t epoch_;
  std::shared_ptr<CancellationToken> cancel_;
  bool started_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Example, size_t>> queue_;
  size_t queued_bytes_ = 0;
  int running_ = 0;  // readers not yet ended
  bool stopping_ = false;
  std::string error_;
  ErrorCode error_code_ = ErrorCode::kIo;
  std::vector<ClientStream*> streams_;
  std::vector<std::thread> readers_;
};

class ServiceDataset final : public Dataset {
 public:
  explicit ServiceDataset(ServiceSourceOptions o) : o_(std::move(o)) {}
  std::string op_name() const override { return "service"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
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
