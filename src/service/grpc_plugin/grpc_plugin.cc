// libdataecho_grpc.so: gRPC's generic callback API behind the C interface of
// grpc_plugin.h (why a plugin: see there). Clients use grpc::GenericStub's callback calls
// (UnaryCall, PrepareBidiStreamingCall); servers one grpc::CallbackGenericService whose
// reactor reads the request and runs the engine's handler on a thread of its own, since
// a handler blocks (in call_write while the receiver is slow, or on its own work), which
// gRPC's callback threads must not. gRPC 1.51 has these calls in its public API (not
// under experimental()).
#include "service/grpc_plugin.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* kTokenKey = "x-dataecho-token";

void set_status(dataecho_grpc_status* out, int code, const std::string& message) {
  if (out == nullptr) return;
  out->code = code;
  const size_t n = std::min(message.size(), sizeof(out->message) - 1);
  std::memcpy(out->message, message.data(), n);
  out->message[n] = '\0';
}

void set_status(dataecho_grpc_status* out, const grpc::Status& s) {
  set_status(out, static_cast<int>(s.error_code()), s.error_message());
}

grpc::ByteBuffer bytes_buffer(const void* data, size_t size) {
  grpc::Slice slice(data, size);  // a copy: requests and unary replies are small
  return grpc::ByteBuffer(&slice, 1);
}

std::string joined(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A constant-time comparison: the time taken says nothing of how much of a wrong token
// matched.
bool same_token(const std::string& expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

// The keep-alive and size settings, for a channel or (with `server`) a server.
template <typename SetInt>
void apply_options(const dataecho_grpc_options* o, bool server, SetInt set_int) {
  const int64_t max = o != nullptr ? o->max_message_bytes : -1;
  set_int(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, max < 0 ? -1 : static_cast<int>(max));
  set_int(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, max < 0 ? -1 : static_cast<int>(max));
  // Large HTTP/2 frames and read chunks: fewer pieces per message, so that more of a
  // received tensor lies in one slice.
  set_int(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024 - 1);
  set_int(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 4 * 1024 * 1024);
  if (o == nullptr) return;
  if (o->keepalive_ms > 0) {
    set_int(GRPC_ARG_KEEPALIVE_TIME_MS, o->keepalive_ms);
    set_int(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    set_int(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (o->keepalive_timeout_ms > 0) set_int(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, o->keepalive_timeout_ms);
  if (server && o->min_ping_interval_ms > 0)
    set_int(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, o->min_ping_interval_ms);
}

// Unary calls retry UNAVAILABLE (a server restarting, a connection not yet up).
constexpr const char* kRetryConfig = R"({"methodConfig": [{"name": [{}], "retryPolicy": {
  "maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
  "retryableStatusCodes": ["UNAVAILABLE"]}}]})";

struct Channel {
  std::shared_ptr<grpc::Channel> channel;
};

bool given(const char* text) { return text != nullptr && *text != '\0'; }

// A channel's credentials: TLS trusting the options' roots when they give some, else none.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const dataecho_grpc_options* o) {
  if (o == nullptr || !given(o->tls_root_pem)) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = o->tls_root_pem;
  return grpc::SslCredentials(ssl);
}

// A server's credentials: TLS with the options' certificate and key when they give them.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const dataecho_grpc_options* o) {
  if (o == nullptr || !given(o->tls_cert_pem)) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({given(o->tls_key_pem) ? o->tls_key_pem : "", o->tls_cert_pem});
  return grpc::SslServerCredentials(ssl);
}

// ---- client streams ----

// A server stream's client side. The reactor holds the call (AddHold) while the engine
// may still start reads from its own thread (next(), when it takes a frame after reading
// had paused): without the hold, gRPC may finish and free the call between the decision
// to read and StartRead. The hold goes when reading is over, or on cancel or free; those
// decisions and StartRead from outside gRPC's callbacks happen under start_mu_.
class ClientStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static constexpr size_t kReadAhead = 2;  // frames received and not yet taken

  ClientStream(const Channel& ch, const char* method, const void* request, size_t size,
               const char* token)
      : request_(bytes_buffer(request, size)) {
    if (token != nullptr && *token != '\0') context_.AddMetadata(kTokenKey, token);
    grpc::GenericStub stub(ch.channel);
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    reading_ = true;
    StartRead(&incoming_);
    AddHold();
    StartCall();
  }

  void OnReadDone(bool ok) override {
    bool more = false;
    {
      std::lock_guard lock(mu_);
      reading_ = false;
      if (ok) {
        frames_.push_back(std::move(incoming_));
        more = frames_.size() < kReadAhead && !cancelled_;
        reading_ = more;
      } else {
        reads_over_ = true;
      }
    }
    cv_.notify_all();
    if (more) StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& s) override {
    std::lock_guard lock(mu_);
    done_ = true;
    status_ = s;
    cv_.notify_all();
  }

  int next(int64_t timeout_ms, dataecho_grpc_slice_sink sink, void* user,
           dataecho_grpc_status* status) {
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return !frames_.empty() || done_ || reads_over_; };
      if (timeout_ms < 0)
        cv_.wait(lock, ready);
      else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready))
        return DATAECHO_GRPC_STREAM_TIMEOUT;
    }
    std::unique_lock start(start_mu_);
    std::unique_lock lock(mu_);
    if (frames_.empty()) {  // no more frames: the call's status once gRPC is done with it
      lock.unlock();
      release_hold();
      lock.lock();
      cv_.wait(lock, [&] { return done_; });
      set_status(status, status_);
      return DATAECHO_GRPC_STREAM_END;
    }
    grpc::ByteBuffer frame = std::move(frames_.front());
    frames_.erase(frames_.begin());
    const bool resume = held_ && !reading_ && !reads_over_ && !cancelled_;
    reading_ = reading_ || resume;
    lock.unlock();
    if (resume) StartRead(&incoming_);
    start.unlock();
    std::vector<grpc::Slice> slices;
    frame.Dump(&slices);
    for (const grpc::Slice& s : slices) {
      auto* ref = new grpc::Slice(s);  // one more reference, given back by slice_unref
      sink(user, dataecho_grpc_slice{ref->begin(), ref->size(), ref});
    }
    set_status(status, 0, "");
    return DATAECHO_GRPC_STREAM_FRAME;
  }

  void cancel() {
    std::lock_guard start(start_mu_);
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    context_.TryCancel();
    release_hold();
  }

  // Cancels the call unless it is over and waits for gRPC's last callback.
  void finish() {
    cancel();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  void release_hold() {  // under start_mu_
    if (!held_) return;
    held_ = false;
    RemoveHold();
  }

  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer incoming_;
  std::mutex start_mu_;  // the engine's threads: reads started, the hold released
  bool held_ = true;     // under start_mu_
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<grpc::ByteBuffer> frames_;
  bool reading_ = false;     // a StartRead is outstanding
  bool reads_over_ = false;  // a read failed: the stream has no more frames
  bool cancelled_ = false;
  bool done_ = false;
  grpc::Status status_;
};

// ---- servers ----

struct Server;

}  // namespace

// A call being served: gRPC's reactor, and what the handler's thread waits on. Freed when
// both gRPC (OnDone) and the handler's thread are done with it.
struct dataecho_grpc_call final : public grpc::ServerGenericBidiReactor {
  dataecho_grpc_call(Server* server, grpc::GenericCallbackServerContext* context);
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu);
    write_pending = false;
    write_ok = ok;
    cancelled = cancelled || !ok;  // a failed write: cancelled or broken (OnCancel may follow)
    cv.notify_all();
  }
  void OnCancel() override {
    std::lock_guard lock(mu);
    cancelled = true;
    cv.notify_all();
  }
  void OnDone() override { release(); }
  void release() {
    if (refs.fetch_sub(1) == 1) delete this;
  }
  void serve();  // on the handler's thread
  int write(grpc::ByteBuffer buffer);
  void finish(int code, const std::string& message) {
    {
      std::lock_guard lock(mu);
      if (finished) return;
      finished = true;
    }
    // Outside the lock: OnDone, which may free this call, may follow at once.
    Finish(grpc::Status(static_cast<grpc::StatusCode>(code), message));
  }

  Server* server;
  grpc::GenericCallbackServerContext* context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer outgoing;
  std::atomic<int> refs{1};  // gRPC's; the handler's thread takes one more
  std::mutex mu;
  std::condition_variable cv;
  bool write_pending = false;
  bool write_ok = true;
  bool cancelled = false;
  bool finished = false;
};

namespace {

class Service final : public grpc::CallbackGenericService {
 public:
  explicit Service(Server* server) : server_(server) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new dataecho_grpc_call(server_, context);
  }

 private:
  Server* server_;
};

struct Server {
  std::string token;
  dataecho_grpc_handlers handlers{};
  void* user = nullptr;
  Service service{this};
  std::unique_ptr<grpc::Server> server;
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;  // handler threads

  void spawn(dataecho_grpc_call* call) {
    {
      std::lock_guard lock(mu);
      ++running;
    }
    call->refs.fetch_add(1);
    std::thread([this, call] {
      call->serve();
      call->release();
      std::lock_guard lock(mu);
      if (--running == 0) cv.notify_all();
    }).detach();
  }
};

}  // namespace

dataecho_grpc_call::dataecho_grpc_call(Server* s, grpc::GenericCallbackServerContext* c)
    : server(s), context(c) {
  if (!s->token.empty()) {
    const auto& metadata = c->client_metadata();
    auto it = metadata.find(kTokenKey);
    const std::string_view given = it == metadata.end()
                                       ? std::string_view()
                                       : std::string_view(it->second.data(), it->second.size());
    if (!same_token(s->token, given)) {
      finish(DATAECHO_GRPC_UNAUTHENTICATED,
             it == metadata.end() ? "the call has no token (x-dataecho-token)"
                                  : "the server refused the call's token (x-dataecho-token)");
      return;
    }
  }
  StartRead(&request);
}

void dataecho_grpc_call::OnReadDone(bool ok) {
  if (!ok) {
    finish(DATAECHO_GRPC_INVALID_ARGUMENT, "the call ended before its request");
    return;
  }
  server->spawn(this);
}

int dataecho_grpc_call::write(grpc::ByteBuffer buffer) {
  std::unique_lock lock(mu);
  if (cancelled || finished || context->IsCancelled()) return -1;
  outgoing = std::move(buffer);
  write_pending = true;
  lock.unlock();
  StartWrite(&outgoing);
  lock.lock();
  cv.wait(lock, [&] { return !write_pending; });
  return write_ok ? 0 : -1;
}

void dataecho_grpc_call::serve() {
  const std::string method = context->method();
  const std::string body = joined(request);
  const dataecho_grpc_handlers& h = server->handlers;
  if (h.is_stream != nullptr && h.is_stream(server->user, method.c_str()) != 0) {
    h.stream(server->user, method.c_str(), body.data(), body.size(), this);
    finish(DATAECHO_GRPC_OK, "");
    return;
  }
  if (h.unary == nullptr) {
    finish(DATAECHO_GRPC_NOT_FOUND, "no method " + method);
    return;
  }
  std::string reply;
  char error[512] = {};
  auto sink = [](void* out, const void* data, size_t size) {
    static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  };
  const int code = h.unary(server->user, method.c_str(), body.data(), body.size(), sink, &reply,
                           error, sizeof(error));
  if (code != DATAECHO_GRPC_OK) {
    finish(code, error);
    return;
  }
  write(bytes_buffer(reply.data(), reply.size()));
  finish(DATAECHO_GRPC_OK, "");
}

extern "C" {

uint32_t dataecho_grpc_abi_version(void) { return DATAECHO_GRPC_ABI_VERSION; }

const char* dataecho_grpc_library_version(void) {
  static const std::string version = grpc::Version();
  return version.c_str();
}

void dataecho_grpc_slice_unref(void* ref) { delete static_cast<grpc::Slice*>(ref); }

void* dataecho_grpc_channel_open(const char* target, const dataecho_grpc_options* options,
                                 dataecho_grpc_status* status) {
  grpc::ChannelArguments args;
  apply_options(options, false, [&](const char* key, int value) { args.SetInt(key, value); });
  args.SetServiceConfigJSON(kRetryConfig);
  if (options != nullptr && given(options->tls_root_pem) && given(options->tls_server_name))
    args.SetSslTargetNameOverride(options->tls_server_name);
  auto channel = grpc::CreateCustomChannel(target, channel_credentials(options), args);
  if (channel == nullptr) {
    set_status(status, DATAECHO_GRPC_INVALID_ARGUMENT, std::string("bad target ") + target);
    return nullptr;
  }
  set_status(status, 0, "");
  return new Channel{std::move(channel)};
}

void dataecho_grpc_channel_free(void* channel) { delete static_cast<Channel*>(channel); }

int dataecho_grpc_unary(void* channel, const char* method, const void* request, size_t request_size,
                        int64_t deadline_ms, const char* token, dataecho_grpc_sink sink,
                        void* sink_user, dataecho_grpc_status* status) {
  grpc::ClientContext context;
  if (deadline_ms > 0)
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  if (token != nullptr && *token != '\0') context.AddMetadata(kTokenKey, token);
  grpc::GenericStub stub(static_cast<Channel*>(channel)->channel);
  const grpc::ByteBuffer req = bytes_buffer(request, request_size);
  grpc::ByteBuffer reply;
  // Notified under the lock: this frame (the lock, the context) outlives the callback.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status s;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &req, &reply, [&](grpc::Status result) {
    std::lock_guard lock(mu);
    s = std::move(result);
    done = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  set_status(status, s);
  if (!s.ok()) return static_cast<int>(s.error_code());
  std::vector<grpc::Slice> slices;
  reply.Dump(&slices);
  for (const grpc::Slice& slice : slices) sink(sink_user, slice.begin(), slice.size());
  return 0;
}

void* dataecho_grpc_stream_open(void* channel, const char* method, const void* request,
                                size_t request_size, const char* token,
                                dataecho_grpc_status* status) {
  set_status(status, 0, "");
  return new ClientStream(*static_cast<Channel*>(channel), method, request, request_size, token);
}

int dataecho_grpc_stream_next(void* stream, int64_t timeout_ms, dataecho_grpc_slice_sink sink,
                              void* sink_user, dataecho_grpc_status* status) {
  return static_cast<ClientStream*>(stream)->next(timeout_ms, sink, sink_user, status);
}

void dataecho_grpc_stream_cancel(void* stream) { static_cast<ClientStream*>(stream)->cancel(); }

void dataecho_grpc_stream_free(void* stream) {
  auto* s = static_cast<ClientStream*>(stream);
  s->finish();
  delete s;
}

void* dataecho_grpc_server_start(const char* address, const dataecho_grpc_options* options,
                                 const char* token, const dataecho_grpc_handlers* handlers,
                                 void* user, int* port, dataecho_grpc_status* status) {
  auto server = std::make_unique<Server>();
  server->token = token != nullptr ? token : "";
  server->handlers = *handlers;
  server->user = user;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, server_credentials(options), port);
  apply_options(options, true,
                [&](const char* key, int value) { builder.AddChannelArgument(key, value); });
  builder.RegisterCallbackGenericService(&server->service);
  server->server = builder.BuildAndStart();
  if (server->server == nullptr || *port == 0) {
    const bool tls = options != nullptr && given(options->tls_cert_pem);
    set_status(status, DATAECHO_GRPC_UNAVAILABLE,
               std::string("cannot listen on ") + address +
                   (tls ? " (or gRPC refused its TLS certificate and key)" : ""));
    if (server->server != nullptr) server->server->Shutdown();
    return nullptr;
  }
  set_status(status, 0, "");
  return server.release();
}

int dataecho_grpc_call_write(dataecho_grpc_call* call, const dataecho_grpc_out_slice* slices,
                             size_t count) {
  std::vector<grpc::Slice> parts;
  parts.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const auto& s = slices[i];
    if (s.release != nullptr)
      parts.emplace_back(const_cast<void*>(s.data), s.size, s.release, s.user);
    else
      parts.emplace_back(s.data, s.size);
  }
  return call->write(grpc::ByteBuffer(parts.data(), parts.size()));
}

int dataecho_grpc_call_cancelled(dataecho_grpc_call* call) {
  std::lock_guard lock(call->mu);
  return call->cancelled || call->context->IsCancelled() ? 1 : 0;
}

void dataecho_grpc_call_finish(dataecho_grpc_call* call, int code, const char* message) {
  call->finish(code, message != nullptr ? message : "");
}

void dataecho_grpc_server_stop(void* server, int64_t grace_ms) {
  auto* s = static_cast<Server*>(server);
  s->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  {
    std::unique_lock lock(s->mu);
    s->cv.wait(lock, [&] { return s->running == 0; });
  }
  s->server->Wait();
  delete s;
}
}
