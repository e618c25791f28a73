// The in-process transport: transport.h's contract without sockets or gRPC. A server is
// an entry in its transport's table of ports; a call runs its handler on a thread of its
// own, as gRPC's calls do here; a stream is a queue of at most two frames between the
// handler's write() and the client's next(), so a slow receiver blocks the sender as
// HTTP/2's flow control does. Frames pass by reference: the receiver gets the sender's
// buffers.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "service/transport.h"

namespace dataecho::service {
namespace {

constexpr size_t kReadAhead = 2;

// What one server-stream call's two sides share.
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Frame> frames;
  bool cancelled = false;
  bool done = false;
  bool severed = false;  // sever_in_process_streams: the client's side is gone
  CallCode code = CallCode::kOk;
  std::string message;

  void end(CallCode c, std::string m) {
    std::lock_guard lock(mu);
    if (done) return;
    done = true;
    code = cancelled ? CallCode::kCancelled : c;
    message = cancelled ? "the call was cancelled" : std::move(m);
    cv.notify_all();
  }
  void cancel() {
    std::lock_guard lock(mu);
    cancelled = true;
    cv.notify_all();
  }
};

class StreamCall final : public ServerCall {
 public:
  explicit StreamCall(std::shared_ptr<StreamState> s) : s_(std::move(s)) {}
  bool write(const Frame& frame) override {
    std::unique_lock lock(s_->mu);
    s_->cv.wait(lock, [&] { return s_->frames.size() < kReadAhead || s_->cancelled; });
    if (s_->cancelled || s_->done) return false;
    if (s_->severed) return true;  // into a connection whose peer is gone
    s_->frames.push_back(frame);
    s_->cv.notify_all();
    return true;
  }
  bool cancelled() override {
    std::lock_guard lock(s_->mu);
    return s_->cancelled;
  }

 private:
  std::shared_ptr<StreamState> s_;
};

// A server: its handlers and the calls it runs.
class Endpoint {
 public:
  Endpoint(std::string token, Handlers handlers)
      : token_(std::move(token)), handlers_(std::move(handlers)) {}

  // Runs `body` on a thread of its own, counted until it returns.
  void spawn(std::function<void()> body) {
    {
      std::lock_guard lock(mu_);
      ++running_;
    }
    std::thread([this, body = std::move(body)] {
      body();
      std::lock_guard lock(mu_);
      if (--running_ == 0) cv_.notify_all();
    }).detach();
  }

  std::shared_ptr<StreamState> open_stream(const std::string& method, std::string request) {
    auto state = std::make_shared<StreamState>();
    {
      std::lock_guard lock(mu_);
      std::erase_if(streams_, [](const auto& weak) { return weak.expired(); });
      streams_.push_back(state);
    }
    spawn([this, state, method, request = std::move(request)] {
      StreamCall call(state);
      std::string message;
      const CallCode code = run_handler([&] { handlers_.stream(method, request, call); }, message);
      state->end(code, message);
    });
    return state;
  }

  // Waits up to `grace_ms` for the calls, cancels the rest, waits for their handlers.
  void stop(int64_t grace_ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(grace_ms), [&] { return running_ == 0; });
    for (const auto& weak : streams_)
      if (auto s = weak.lock()) s->cancel();
    cv_.wait(lock, [&] { return running_ == 0; });
  }

  // sever_in_process_streams's: the streams open now lose their client. Their count.
  int sever() {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& weak : streams_) {
      auto s = weak.lock();
      if (!s) continue;
      std::lock_guard stream_lock(s->mu);
      if (s->done || s->cancelled || s->severed) continue;
      s->severed = true;
      s->frames.clear();
      s->cv.notify_all();
      ++n;
    }
    return n;
  }

  const std::string& token() const { return token_; }
  const Handlers& handlers() const { return handlers_; }

 private:
  std::string token_;
  Handlers handlers_;
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
  std::vector<std::weak_ptr<StreamState>> streams_;
};

// The servers of one transport, by port.
struct Table {
  std::mutex mu;
  std::map<int, std::shared_ptr<Endpoint>> servers;
  int next_port = 1;
};

class InProcessStream final : public ClientStream {
 public:
  InProcessStream(std::shared_ptr<StreamState> s, std::string method, std::string target)
      : s_(std::move(s)), method_(std::move(method)), target_(std::move(target)) {}
  ~InProcessStream() override { cancel(); }

  Next next(Frame& frame, int64_t timeout_ms) override {
    std::unique_lock lock(s_->mu);
    auto ready = [&] { return !s_->frames.empty() || s_->done || s_->cancelled || s_->severed; };
    if (timeout_ms < 0)
      s_->cv.wait(lock, ready);
    else if (!s_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready))
      return Next::kTimeout;
    if (s_->severed)
      throw CallError(CallCode::kUnavailable, "the connection was severed (test)", method_,
                      target_);
    if (!s_->frames.empty()) {
      frame = std::move(s_->frames.front());
      s_->frames.pop_front();
      s_->cv.notify_all();
      return Next::kFrame;
    }
    frame.clear();
    if (s_->cancelled)
      throw CallError(CallCode::kCancelled, "the call was cancelled", method_, target_);
    if (s_->code != CallCode::kOk) throw CallError(s_->code, s_->message, method_, target_);
    return Next::kEnd;
  }
  void cancel() override {
    {
      std::lock_guard lock(s_->mu);
      if (s_->severed) return;  // the cancel does not reach the server
    }
    s_->cancel();
  }

 private:
  std::shared_ptr<StreamState> s_;
  std::string method_, target_;
};

class InProcessChannel final : public Channel {
 public:
  InProcessChannel(std::shared_ptr<Table> table, std::string target)
      : table_(std::move(table)), target_(std::move(target)) {}
  const std::string& target() const override { return target_; }

  std::string unary(const std::string& method, std::string_view request,
                    const CallOptions& o) override {
    auto server = connect(method, o);
    struct Result {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      CallCode code = CallCode::kOk;
      std::string body;
    };
    auto result = std::make_shared<Result>();
    server->spawn([server, result, method, request = std::string(request)] {
      std::string reply, message;
      const CallCode code = run_handler(
          [&] {
            if (!server->handlers().unary)
              throw CallError(CallCode::kNotFound, "no method " + method);
            reply = server->handlers().unary(method, request);
          },
          message);
      std::lock_guard lock(result->mu);
      result->done = true;
      result->code = code;
      result->body = code == CallCode::kOk ? std::move(reply) : std::move(message);
      result->cv.notify_all();
    });
    std::unique_lock lock(result->mu);
    auto done = [&] { return result->done; };
    if (o.deadline_ms <= 0)
      result->cv.wait(lock, done);
    else if (!result->cv.wait_for(lock, std::chrono::milliseconds(o.deadline_ms), done))
      throw CallError(CallCode::kDeadlineExceeded, "Deadline Exceeded", method, target_);
    if (result->code != CallCode::kOk) throw CallError(result->code, result->body, method, target_);
    return std::move(result->body);
  }

  std::unique_ptr<ClientStream> stream(const std::string& method, std::string_view request,
                                       const CallOptions& o) override {
    std::shared_ptr<StreamState> state;
    try {
      state = connect(method, o)->open_stream(method, std::string(request));
    } catch (const CallError& e) {  // as over gRPC, the stream's first next() says it
      state = std::make_shared<StreamState>();
      state->end(e.call_code(), e.detail());
    }
    return std::make_unique<InProcessStream>(state, method, target_);
  }

 private:
  // The server at target_, its token checked.
  std::shared_ptr<Endpoint> connect(const std::string& method, const CallOptions& o) {
    std::shared_ptr<Endpoint> server;
    {
      std::lock_guard lock(table_->mu);
      const size_t colon = target_.rfind(':');
      const int port = colon == std::string::npos ? -1 : std::atoi(target_.c_str() + colon + 1);
      auto it = table_->servers.find(port);
      if (it != table_->servers.end()) server = it->second;
    }
    if (server == nullptr)
      throw CallError(CallCode::kUnavailable, "no server listens there", method, target_);
    if (!server->token().empty() && o.token != server->token())
      throw CallError(CallCode::kUnauthenticated,
                      o.token.empty() ? "the call has no token (x-dataecho-token)"
                                      : "the server refused the call's token (x-dataecho-token)",
                      method, target_);
    return server;
  }

  std::shared_ptr<Table> table_;
  std::string target_;
};

class InProcessServer final : public Server {
 public:
  InProcessServer(std::shared_ptr<Table> table, int port, std::shared_ptr<Endpoint> endpoint)
      : table_(std::move(table)), port_(port), endpoint_(std::move(endpoint)) {}
  ~InProcessServer() override { stop(0); }
  int port() const override { return port_; }
  void stop(int64_t grace_ms) override {
    if (stopped_) return;
    stopped_ = true;
    {
      std::lock_guard lock(table_->mu);
      table_->servers.erase(port_);
    }
    endpoint_->stop(grace_ms);
  }

 private:
  std::shared_ptr<Table> table_;
  int port_;
  std::shared_ptr<Endpoint> endpoint_;
  bool stopped_ = false;
};

class InProcessTransport final : public Transport {
 public:
  int sever(const std::string& target) {
    std::shared_ptr<Endpoint> server;
    {
      std::lock_guard lock(table_->mu);
      const size_t colon = target.rfind(':');
      const int port = colon == std::string::npos ? -1 : std::atoi(target.c_str() + colon + 1);
      auto it = table_->servers.find(port);
      if (it != table_->servers.end()) server = it->second;
    }
    return server ? server->sever() : 0;
  }
  std::string name() const override { return "in-process"; }
  std::unique_ptr<Channel> open_channel(const std::string& target,
                                        const TransportOptions&) override {
    return std::make_unique<InProcessChannel>(table_, target);
  }
  std::unique_ptr<Server> start_server(const std::string& address, const TransportOptions&,
                                       const std::string& token, Handlers handlers) override {
    const size_t colon = address.rfind(':');
    int port = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
    auto endpoint = std::make_shared<Endpoint>(token, std::move(handlers));
    std::lock_guard lock(table_->mu);
    if (port == 0) port = table_->next_port++;
    if (!table_->servers.emplace(port, endpoint).second)
      throw CallError(CallCode::kUnavailable, "cannot listen: port in use", "", address);
    return std::make_unique<InProcessServer>(table_, port, endpoint);
  }

 private:
  std::shared_ptr<Table> table_ = std::make_shared<Table>();
};

}  // namespace

std::shared_ptr<Transport> in_process_transport() { return std::make_shared<InProcessTransport>(); }

int sever_in_process_streams(Transport& transport, const std::string& target) {
  auto* t = dynamic_cast<InProcessTransport*>(&transport);
  if (t == nullptr)
    throw Error(ErrorCode::kInvalidArgument, "service",
                "sever_in_process_streams needs the in-process transport, not " + transport.name());
  return t->sever(target);
}

}  // namespace dataecho::service
