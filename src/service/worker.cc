// Why this file is long: one worker serves both kinds of stream (sharding "off"'s shared
// passes; the pieces of "dynamic" and "static" with their leases, the lease ahead and the
// tests' fault points) and its beats, all over the worker's one state and lock.
// A worker: registers with the dispatcher by its first beat, beats on, and serves Read
// streams. In sharding "off" it builds a job's whole upstream for each pass (epoch)
// through the injected builder, its seed salted by the worker's number and the epoch,
// and a thread of the pass pulls the pipeline into frames (frame.h) only while the
// pass's outbox of two frames has room: a consumer that stops reading stops the
// pipeline. The streams reading one pass share its frames (each element goes to one of
// them); a pass is made by the first Read of its epoch, and when the last stream of a
// pass leaves, the pass is dropped, so that the next Read of that epoch starts it again
// from the beginning (off mode keeps no positions). A Read carries its job's spec, so a
// worker serves a job its beats have not listed yet.
// In sharding "dynamic" a Read is one consumer's: the worker asks the dispatcher for the
// consumer's next piece (GetSplit), builds the piece's pipeline (the upstream's
// element-wise stages over make_piece_source from the lease's first record, through the
// injected PieceBuilder) and streams its elements, each with its record in the piece,
// then PIECE_DONE; then the next piece, until the dispatcher says the consumer's lanes
// of the epoch are done. The next piece is leased ahead, at 90% of the current one's
// records, so a stream holds at most two leases. In sharding "static" a Read is one lane
// of one consumer: its pieces in piece order, each leased once the one before is done
// (no lease ahead). While the dispatcher is down (restarted on its journal) the
// worker asks again, up to its connect timeout. The handler's thread pulls the pipeline
// only while the stream takes frames.
// Leaving (drain(): a SIGTERM's, or the dispatcher's order in a beat's reply): the worker
// refuses new streams, asks for no new lease, and says so in its beats; each dynamic
// stream finishes the piece it holds and then ends with UNAVAILABLE ("worker w1 is
// leaving"), which its consumer takes as a cut stream with nothing to release (the
// piece is done), so it reads on from the other workers. Off-mode streams run to the
// end of their passes. stop() after a drain says, in a last beat, that it has left.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "dataecho/service/service.h"
#include "service/calls.h"
#include "service/frame.h"

namespace dataecho::service {
namespace {

constexpr size_t kOutboxFrames = 2;
constexpr size_t kFrameElements = 64;
constexpr size_t kFrameBytes = 4 << 20;
constexpr int64_t kTakeWaitMs = 200;
constexpr int64_t kSplitRetryMs = 20;  // GetSplit again after NONE

struct Outgoing {
  Frame frame;
  int64_t elements = 0;
  int64_t bytes = 0;
};

// One pass of a job's upstream.
class Pass {
 public:
  Pass(std::function<std::unique_ptr<Pipeline>()> build, FrameHeader header)
      : build_(std::move(build)), header_(header) {
    thread_ = std::thread([this] { run(); });
  }
  ~Pass() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      if (pipeline_) pipeline_->cancel();
      cv_.notify_all();
    }
    thread_.join();
  }

  enum class Take { kFrame, kEnd, kWait };
  // The next frame (kFrame), the end of the pass (kEnd: error() says whether it failed),
  // or nothing yet after `wait_ms` (kWait).
  Take take(Outgoing& out, int64_t wait_ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                 [&] { return !outbox_.empty() || ended_; });
    if (!outbox_.empty()) {
      out = std::move(outbox_.front());
      outbox_.pop_front();
      cv_.notify_all();
      return Take::kFrame;
    }
    return ended_ ? Take::kEnd : Take::kWait;
  }
  std::string error() {
    std::lock_guard lock(mu_);
    return error_;
  }
  const FrameHeader& header() const { return header_; }
  int streams = 0;  // under the worker's lock

 private:
  void run() {
    std::unique_ptr<Pipeline> pipeline;
    try {
      pipeline = build_();
    } catch (const std::exception& e) {
      return finish("cannot build the upstream: " + std::string(e.what()));
    }
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      pipeline_ = pipeline.get();
    }
    int64_t record = 0;
    try {
      while (fill(*pipeline, record)) {
      }
    } catch (const std::exception& e) {
      finish("failed in its upstream after " + std::to_string(record) +
             " elements: " + std::string(e.what()));
    }
    std::lock_guard lock(mu_);
    pipeline_ = nullptr;
  }

  // Waits for room in the outbox, then makes a frame of the next elements. False at the
  // end of the pass (or when stopping).
  bool fill(Pipeline& pipeline, int64_t& record) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return outbox_.size() < kOutboxFrames || stopping_; });
      if (stopping_) return false;
    }
    FrameWriter writer(header_);
    Outgoing out;
    bool more = true;
    while (writer.count() < kFrameElements && writer.bytes() < kFrameBytes) {
      auto element = pipeline.next();
      if (!element) {
        more = false;
        break;
      }
      out.bytes += static_cast<int64_t>(element->nbytes());
      writer.add(record++, *element);
    }
    out.elements = static_cast<int64_t>(writer.count());
    std::lock_guard lock(mu_);
    if (out.elements > 0) outbox_.push_back({writer.finish(), out.elements, out.bytes});
    if (!more) ended_ = true;
    cv_.notify_all();
    return more;
  }

  void finish(const std::string& error) {
    std::lock_guard lock(mu_);
    if (!stopping_) error_ = error;
    ended_ = true;
    cv_.notify_all();
  }

  std::function<std::unique_ptr<Pipeline>()> build_;
  const FrameHeader header_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Outgoing> outbox_;
  bool ended_ = false;
  bool stopping_ = false;
  std::string error_;
  Pipeline* pipeline_ = nullptr;  // while the thread reads it
  std::thread thread_;
};

// host:port -> {host, port}; the host without the brackets of an IPv6 address.
std::pair<std::string, std::string> split_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw_error(ErrorCode::kInvalidArgument, "service",
                "expected HOST:PORT, got \"" + address + "\"");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, address.substr(colon + 1)};
}

// The local address of the route to `dispatcher` (a UDP socket connected to it, which
// sends nothing): where this worker is reached from the dispatcher's side.
std::string local_host_towards(const std::string& dispatcher) {
  const auto [host, port] = split_address(dispatcher);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr)
    throw_error(ErrorCode::kInvalidArgument, "service",
                "cannot resolve the dispatcher's host " + host + ": give --advertise HOST");
  std::string local;
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* a =
        addr.ss_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&addr)->sin_addr);
    if (inet_ntop(addr.ss_family, a, text, sizeof(text)) != nullptr)
      local = addr.ss_family == AF_INET6 ? "[" + std::string(text) + "]" : text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (local.empty())
    throw_error(ErrorCode::kIo, "service",
                "cannot tell this worker's address on the route to " + dispatcher +
                    ": give --advertise HOST");
  return local;
}

std::string advertised(const WorkerOptions& o, int port) {
  if (o.advertise.empty()) return local_host_towards(o.dispatcher) + ":" + std::to_string(port);
  const bool has_port = o.advertise.back() != ']' && o.advertise.find(':') != std::string::npos &&
                        o.advertise.find(':') == o.advertise.rfind(':');
  return has_port ? o.advertise : o.advertise + ":" + std::to_string(port);
}

class WorkerImpl final : public Worker {
 public:
  explicit WorkerImpl(const WorkerOptions& o)
      : o_(o), transport_(o.transport ? o.transport : default_transport()) {
    if (!o_.builder)
      throw_error(ErrorCode::kInvalidArgument, "service", "a worker needs an upstream builder");
    Handlers h;
    h.is_stream = [](const std::string& method) { return method == kRead; };
    h.stream = [this](const std::string& method, std::string_view request, ServerCall& call) {
      if (method != kRead)
        throw CallError(CallCode::kNotFound, "the worker has no method " + method);
      serve_unary([&] {
        serve_read(request, call);
        return std::string();
      });
    };
    server_ = transport_->start_server(o_.bind + ":" + std::to_string(o_.port),
                                       server_transport(o_.tls), o_.token, std::move(h));
    address_ = advertised(o_, server_->port());
    channel_ = transport_->open_channel(o_.dispatcher, client_transport(o_.tls));
    retry_unreachable(o_.connect_timeout_s, o_.dispatcher, [&](int64_t ms) { beat(ms); });
    beater_ = std::thread([this] { beat_loop(); });
  }
  ~WorkerImpl() override { stop(); }

  int64_t number() const override { return number_; }
  int port() const override { return server_->port(); }
  const std::string& address() const override { return address_; }

  void drain() override {
    if (draining_.exchange(true)) return;
    tell_dispatcher("it leaves");  // it lists the worker no more, now rather than at the next beat
  }
  bool draining() const override { return draining_; }
  int64_t open_streams() const override { return open_streams_; }

  void stop() override {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      cv_.notify_all();
    }
    if (beater_.joinable()) beater_.join();
    if (draining_ && !killed_) say_left();
    server_->stop(0);
    std::map<PassKey, std::shared_ptr<Pass>> passes;
    {
      std::lock_guard lock(mu_);
      passes.swap(passes_);
    }
    passes.clear();  // joins their threads
  }

 private:
  // One beat: says the worker is alive (registering it the first time). The reply's list
  // of jobs is not needed in off mode: a Read carries its job's spec.
  void beat(int64_t deadline_ms) {
    WorkerBeatRequest request;
    request.set_worker(number_);
    request.set_address(address_);
    request.set_threads(o_.threads);
    request.set_elements(elements_);
    request.set_bytes(bytes_);
    request.set_leaving(draining_);
    request.set_left(left_);
    request.set_launch_index(o_.launch_index);
    const auto orders = call_unary<WorkerBeatRequest, WorkerOrders>(
        *channel_, kWorkerBeat, request, {.deadline_ms = deadline_ms, .token = o_.token},
        {"worker", "--token-file"}, "dispatcher");
    number_ = orders.worker();
    if (orders.leave() && !draining_.exchange(true))
      std::cerr << "worker w" << number_ << ": the dispatcher asks it to leave\n";
  }

  // The last beat of a worker that drained: it has left (not failed).
  void say_left() {
    left_ = true;
    tell_dispatcher("it left");
  }

  // A beat out of turn, with what the worker is doing now; a failure is said, not thrown.
  void tell_dispatcher(const char* what) {
    try {
      beat(2'000);
    } catch (const std::exception& e) {
      std::cerr << "worker w" << number_ << ": cannot tell the dispatcher " << what << ": "
                << e.what() << "\n";
    }
  }

  // Refuses a stream or a lease once the worker is leaving.
  void check_staying() const {
    if (draining_)
      throw CallError(CallCode::kUnavailable, "worker w" + std::to_string(number_) +
                                                  " is leaving (its pieces held are done)");
  }

  // Counts a stream served while it lives.
  struct StreamCount {
    explicit StreamCount(std::atomic<int64_t>& n) : n_(n) { ++n_; }
    ~StreamCount() { --n_; }
    std::atomic<int64_t>& n_;
  };

  void beat_loop() {
    bool failing = false;
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(o_.beat_ms), [&] { return stopped_; })) {
      lock.unlock();
      try {
        beat(5'000);
        if (failing) std::cerr << "worker w" << number_ << ": the dispatcher answers again\n";
        failing = false;
      } catch (const std::exception& e) {
        if (!failing) std::cerr << "worker w" << number_ << ": beat failed: " << e.what() << "\n";
        failing = true;
      }
      lock.lock();
    }
  }

  // A pass's key: the job by name and upstream (its id is the dispatcher's, which a
  // dispatcher restarted without a journal gives again to another job), and the epoch.
  using PassKey = std::tuple<std::string, std::string, int64_t>;
  static PassKey key_of(const ReadRequest& r) {
    return {r.spec().name(), r.spec().fingerprint(), r.epoch()};
  }

  // The pass a Read asks for, made when there is none, read by one more stream. Under mu_.
  std::shared_ptr<Pass> join(const ReadRequest& r) {
    auto& pass = passes_[key_of(r)];
    if (!pass) {
      auto build = [this, upstream = r.spec().upstream_json(), epoch = r.epoch()] {
        return o_.builder(upstream, number_, epoch, o_.threads);
      };
      pass = std::make_shared<Pass>(build, FrameHeader{.job = r.job(), .epoch = r.epoch()});
    }
    ++pass->streams;
    return pass;
  }

  // A stream left: the last one drops the pass (its thread joined outside the lock).
  void leave(const ReadRequest& r, const std::shared_ptr<Pass>& pass) {
    std::shared_ptr<Pass> dropped;
    std::lock_guard lock(mu_);
    auto it = passes_.find(key_of(r));
    if (--pass->streams == 0 && it != passes_.end() && it->second == pass) {
      dropped = std::move(it->second);
      passes_.erase(it);
    }
  }

  void serve_read(std::string_view bytes, ServerCall& call) {
    const auto request = parse_request<ReadRequest>(bytes, kRead);
    check_hello(request.hello(), "(job '" + request.spec().name() + "')", "worker");
    check_alive();
    const StreamCount counted(open_streams_);
    check_staying();
    if (request.spec().sharding() != JobSpec::OFF) return serve_dynamic(request, call);
    std::shared_ptr<Pass> pass;
    {
      std::lock_guard lock(mu_);
      if (stopped_) throw CallError(CallCode::kUnavailable, "the worker is stopping");
      pass = join(request);
    }
    try {
      stream_pass(*pass, call);
    } catch (...) {
      leave(request, pass);
      throw;
    }
    leave(request, pass);
  }

  void stream_pass(Pass& pass, ServerCall& call) {
    for (;;) {
      Outgoing out;
      const Pass::Take t = pass.take(out, kTakeWaitMs);
      if (t == Pass::Take::kWait) {
        if (call.cancelled()) return;
        continue;
      }
      if (t == Pass::Take::kEnd) {
        if (const std::string error = pass.error(); !error.empty())
          call.write(error_frame(pass.header(), error));
        return;
      }
      if (!call.write(out.frame)) return;
      elements_ += out.elements;
      bytes_ += out.bytes;
    }
  }

  void check_alive() const {
    if (killed_) throw CallError(CallCode::kUnavailable, "worker killed (fault injection)");
  }
  // The tests' fault injection: kills the worker at `point` when the hook says so.
  void fault_at(const std::string& point, int64_t piece) {
    const Fault f = o_.fault ? o_.fault(point, piece) : Fault::kNone;
    if (f == Fault::kKill) killed_ = true;
    check_alive();
    if (f == Fault::kCutStream)
      throw CallError(CallCode::kUnavailable, "stream cut (fault injection)");
  }

  // Sharding "dynamic" and "static": the consumer's pieces (static: of the stream's
  // lane), one lease after another; in "dynamic" the next one is leased ahead, at 90% of
  // the current one (lease_ahead), so a stream holds at most two leases.
  void serve_dynamic(const ReadRequest& r, ServerCall& call) {
    if (!o_.piece_builder)
      throw CallError(CallCode::kInvalidArgument, "this worker cannot read pieces (no builder)");
    auto channel =
        transport_->open_channel(o_.dispatcher, client_transport(o_.tls));  // this stream's own
    Lease lease;
    std::optional<Lease> ahead;
    for (;;) {
      if (ahead) {
        check_alive();
        check_staying();  // a leaving worker ends the stream: its consumer releases `ahead`
        lease = *std::exchange(ahead, std::nullopt);
      } else if (!next_lease(*channel, r, call, lease)) {
        return;
      }
      PieceRun run{.r = r, .lease = lease, .channel = *channel, .ahead = ahead};
      if (!stream_lease(run, call)) return;
    }
  }

  // The request for the consumer's next piece after the stream's lease `previous`.
  SplitRequest split_request(const ReadRequest& r, int64_t previous) const {
    SplitRequest request;
    request.set_job(r.job());
    request.set_consumer(r.consumer());
    request.set_epoch(r.epoch());
    request.set_worker(number_);
    request.set_incarnation(r.incarnation());
    request.set_previous_lease(previous);
    request.set_lane(r.lane());
    request.set_stream(r.stream());
    return request;
  }

  // A piece being streamed, and the lease taken ahead of its end.
  struct PieceRun {
    const ReadRequest& r;
    const Lease& lease;
    Channel& channel;
    std::optional<Lease>& ahead;
    int64_t length = 0;  // the piece's records
    bool asked = false;  // whether the lease ahead was asked for
  };

  // Sharding "dynamic": the consumer's next lease, asked for once the piece's records
  // sent reach 90% of it (or its elements end), so that the next piece's pipeline starts
  // with no wait on the dispatcher. One try, without waiting: NONE, or a dispatcher that
  // does not answer, leaves it to next_lease after the piece (a lease whose reply was
  // lost is given again there). The lease is held as the current one is: a consumer that
  // cuts the stream releases both. Static leases a lane's pieces one at a time: none.
  void lease_ahead(PieceRun& run, int64_t records_sent) {
    if (run.asked || run.r.spec().sharding() != JobSpec::DYNAMIC || draining_ || killed_ ||
        records_sent * 10 < run.length * 9)
      return;
    run.asked = true;
    SplitReply reply;
    try {
      reply = call_unary<SplitRequest, SplitReply>(
          run.channel, kGetSplit, split_request(run.r, run.lease.lease()),
          {.deadline_ms = 2'000, .token = o_.token}, {"worker", "--token-file"}, "dispatcher");
    } catch (const CallError& e) {
      if (e.call_code() == CallCode::kCancelled) throw;  // the consumer cut or restarted
      return;
    }
    if (reply.kind() != SplitReply::LEASE) return;
    run.ahead = reply.lease();
    fault_at("ahead", run.ahead->piece());
  }

  // The consumer's next lease after `lease` (the stream's previous one, or none); false at
  // the end of its lanes' epoch or a cancelled call. While the dispatcher cannot be
  // reached (restarted) the call is tried again for connect_timeout_s.
  bool next_lease(Channel& channel, const ReadRequest& r, ServerCall& call, Lease& lease) {
    const SplitRequest request = split_request(r, lease.lease());
    const auto stopped = [&] { return killed_ || call.cancelled(); };
    for (;;) {
      check_alive();
      if (call.cancelled()) return false;
      check_staying();
      SplitReply reply;
      retry_unreachable(
          o_.connect_timeout_s, o_.dispatcher,
          [&](int64_t ms) {
            reply = call_unary<SplitRequest, SplitReply>(
                channel, kGetSplit, request,
                {.deadline_ms = std::min<int64_t>(ms, 5'000), .token = o_.token},
                {"worker", "--token-file"}, "dispatcher");
          },
          stopped);
      if (reply.kind() == SplitReply::END) return false;
      if (reply.kind() == SplitReply::LEASE) {
        lease = reply.lease();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kSplitRetryMs));
    }
  }

  // Streams one lease: its elements, then PIECE_DONE. False when the stream is broken or
  // the pipeline failed (its ERROR frame sent).
  bool stream_lease(PieceRun& run, ServerCall& call) {
    const ReadRequest& r = run.r;
    const Lease& lease = run.lease;
    const FrameHeader header{
        .job = r.job(), .epoch = r.epoch(), .piece = lease.piece(), .lease = lease.lease()};
    fault_at("lease", lease.piece());
    std::vector<RecordRange> ranges;
    int64_t length = 0;
    for (const auto& a : nlohmann::json::parse(lease.piece_json())) {
      ranges.push_back({.shard = a[0].get<int64_t>(),
                        .begin = a[1].get<int64_t>(),
                        .end = a[2].get<int64_t>(),
                        .offset = a[3].get<uint64_t>()});
      length += ranges.back().end - ranges.back().begin;
    }
    run.length = length;
    auto tap = std::make_shared<RecordTap>();
    std::unique_ptr<Pipeline> pipeline;
    try {
      pipeline =
          o_.piece_builder(r.spec().upstream_json(), r.epoch(), o_.threads,
                           [&](std::shared_ptr<const Dataset> source) {
                             return make_piece_source(std::move(source), ranges, lease.from(), tap);
                           });
    } catch (const std::exception& e) {
      call.write(error_frame(header, "cannot build the upstream: " + std::string(e.what())));
      return false;
    }
    try {
      if (!stream_piece(*pipeline, *tap, header, call, run)) return false;
    } catch (const CallError&) {
      throw;
    } catch (const std::exception& e) {
      call.write(error_frame(header, "failed in its upstream in piece " +
                                         std::to_string(lease.piece()) + ": " + e.what()));
      return false;
    }
    lease_ahead(run, length);  // the piece's elements ended before 90% of its records
    fault_at("done", lease.piece());
    return call.write(piece_done_frame(header, length));
  }

  // The piece's elements in frames, each with its record in the piece.
  bool stream_piece(Pipeline& pipeline, RecordTap& tap, const FrameHeader& header, ServerCall& call,
                    PieceRun& run) {
    int64_t record = run.lease.from() - 1;  // the last record sent
    for (bool more = true; more;) {
      check_alive();
      FrameWriter writer(header);
      int64_t bytes = 0;
      while (writer.count() < kFrameElements && writer.bytes() < kFrameBytes) {
        auto element = pipeline.next();
        if (!element) {
          more = false;
          break;
        }
        bytes += static_cast<int64_t>(element->nbytes());
        record = record_of(tap, element->id());
        writer.add(record, *element);
      }
      const auto count = static_cast<int64_t>(writer.count());
      if (count == 0) break;
      if (!call.write(writer.finish())) return false;
      elements_ += count;
      bytes_ += bytes;
      fault_at("frame", header.piece);
      lease_ahead(run, record + 1);
    }
    return true;
  }

  // The record in the piece of the source element with this id (those before it were
  // filtered out).
  static int64_t record_of(RecordTap& tap, int64_t id) {
    std::lock_guard lock(tap.mu);
    while (!tap.read.empty()) {
      const auto [read_id, record] = tap.read.front();
      tap.read.pop_front();
      if (read_id == id) return record;
    }
    throw Error(ErrorCode::kInvalidArgument, "service",
                "an element of id " + std::to_string(id) +
                    " is not one the piece's source read next: sharding \"dynamic\" needs "
                    "stages that keep each element's id and order (map, filter)");
  }

  const WorkerOptions o_;
  std::atomic<bool> killed_{false};
  std::atomic<bool> draining_{false}, left_{false};
  std::atomic<int64_t> open_streams_{0};
  std::shared_ptr<Transport> transport_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Channel> channel_;
  std::string address_;
  std::atomic<int64_t> number_{0};
  std::atomic<int64_t> elements_{0}, bytes_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::map<PassKey, std::shared_ptr<Pass>> passes_;
  std::thread beater_;
};

}  // namespace

std::unique_ptr<Worker> start_worker(const WorkerOptions& options) {
  return std::make_unique<WorkerImpl>(options);
}

}  // namespace dataecho::service
