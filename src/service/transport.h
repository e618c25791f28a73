// The data service's transport: unary calls (the dispatcher's control messages) and
// server streams (a worker's frames to a trainer), between a Channel and a Server.
// Two implementations keep one contract (tests/service/grpc_transport_test.cc runs the
// same tests on both):
// - grpc_transport(): gRPC, through the plugin libdataecho_grpc.so that it loads with
//   dlopen on first use (grpc_plugin.h says why a plugin). A process that never opens a
//   channel or a server never maps gRPC.
// - in_process_transport(): servers and channels inside one process, no sockets: for
//   tests, and for TSan builds, which do not load the plugin (TSan cannot see the
//   threads of an uninstrumented library).
// A frame is a list of buffers: sent without a copy (gRPC takes a reference to each
// buffer until the bytes are on the wire) and received as views of the transport's own
// slices where it can.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/core/tensor.h"
#include "service/grpc_plugin.h"

namespace dataecho::service {

using Frame = std::vector<std::shared_ptr<const Buffer>>;

// gRPC's status codes that the service tells apart (the numbers: grpc_plugin.h's).
enum class CallCode : int {
  kOk = DATAECHO_GRPC_OK,
  kCancelled = DATAECHO_GRPC_CANCELLED,
  kUnknown = DATAECHO_GRPC_UNKNOWN,
  kInvalidArgument = DATAECHO_GRPC_INVALID_ARGUMENT,
  kDeadlineExceeded = DATAECHO_GRPC_DEADLINE_EXCEEDED,
  kNotFound = DATAECHO_GRPC_NOT_FOUND,
  kInternal = DATAECHO_GRPC_INTERNAL,
  kUnavailable = DATAECHO_GRPC_UNAVAILABLE,
  kUnauthenticated = DATAECHO_GRPC_UNAUTHENTICATED,
};
// "DEADLINE_EXCEEDED", as gRPC spells it ("code 7" for the others).
std::string call_code_name(CallCode code);

// A failed call: its code, and what() reads "service: METHOD at TARGET: CODE: message".
class CallError : public Error {
 public:
  CallError(CallCode code, const std::string& detail, const std::string& method = "",
            const std::string& target = "");
  CallCode call_code() const { return call_code_; }
  const std::string& detail() const { return detail_; }  // the message alone

 private:
  CallCode call_code_;
  std::string detail_;
};

// Runs a handler: OK, or the code and message its exception gives (CallError: its own,
// any other: UNKNOWN and what()). For the transports.
CallCode run_handler(const std::function<void()>& handler, std::string& message);

struct TransportOptions {
  int32_t keepalive_ms = 10'000;
  int32_t keepalive_timeout_ms = 5'000;
  int32_t min_ping_interval_ms = 5'000;  // servers: must not exceed clients' keepalive_ms
  int64_t max_message_bytes = -1;        // -1: unlimited
  // TLS, as PEM text ("": plaintext; the in-process transport has none). A channel with
  // roots speaks TLS, trusts them alone and checks that the server's certificate names
  // `tls_server_name` ("": the target's host); a server with a certificate and its key
  // serves TLS alone.
  std::string tls_root_pem, tls_server_name;
  std::string tls_cert_pem, tls_key_pem;
};

struct CallOptions {
  int64_t deadline_ms = 0;  // 0: none
  std::string token;        // sent as the x-dataecho-token metadata when not empty
};

class ClientStream {
 public:
  enum class Next { kFrame, kEnd, kTimeout };
  virtual ~ClientStream() = default;
  // Waits at most `timeout_ms` (-1: without limit) for the next frame. kEnd: the server
  // finished with OK; any other end throws CallError (CANCELLED after cancel()).
  virtual Next next(Frame& frame, int64_t timeout_ms = -1) = 0;
  // Ends the call: the server's blocked and later writes fail. Frames already received
  // are still returned first.
  virtual void cancel() = 0;
};

class Channel {
 public:
  virtual ~Channel() = default;
  virtual const std::string& target() const = 0;
  // One request, one reply; throws CallError.
  virtual std::string unary(const std::string& method, std::string_view request,
                            const CallOptions& options = {}) = 0;
  // A server stream for `request`. Reads ahead at most two frames.
  virtual std::unique_ptr<ClientStream> stream(const std::string& method, std::string_view request,
                                               const CallOptions& options = {}) = 0;
};

// A server-stream call as its handler sees it.
class ServerCall {
 public:
  virtual ~ServerCall() = default;
  // Sends one frame; blocks until the transport has taken it (true) or the call is
  // cancelled or broken (false: the handler should return).
  virtual bool write(const Frame& frame) = 0;
  virtual bool cancelled() = 0;
};

struct Handlers {
  // A unary method's reply; a CallError thrown gives its code, any other exception
  // UNKNOWN with its what().
  std::function<std::string(const std::string& method, std::string_view request)> unary;
  // Whether `method` is a server stream (served by `stream`); null: none is.
  std::function<bool(const std::string& method)> is_stream;
  // A server stream: returning ends it with OK; throwing, as for unary.
  std::function<void(const std::string& method, std::string_view request, ServerCall& call)> stream;
};

class Server {
 public:
  virtual ~Server() = default;  // stops with no grace if not stopped
  virtual int port() const = 0;
  // Stops accepting calls, gives running ones `grace_ms`, cancels the rest and waits for
  // their handlers to return.
  virtual void stop(int64_t grace_ms) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  // A channel to "host:port"; it connects on its first call.
  virtual std::unique_ptr<Channel> open_channel(const std::string& target,
                                                const TransportOptions& options = {}) = 0;
  // A server on `address` ("127.0.0.1:0": any free port, see port()); each call runs its
  // handler on a thread of its own; calls without `token` (when not empty) are refused
  // with UNAUTHENTICATED.
  virtual std::unique_ptr<Server> start_server(const std::string& address,
                                               const TransportOptions& options,
                                               const std::string& token, Handlers handlers) = 0;
};

// Where grpc_transport() looks for the plugin, in order: $DATAECHO_GRPC_PLUGIN, beside the
// engine's code (module_dir(): a wheel's dataecho/ folder), the installed path, the
// build's path. Empty where the build has no plugin.
std::vector<std::string> grpc_plugin_paths();
// gRPC, its plugin loaded once (by the first call); throws naming every path tried and
// why each failed, or why this build has no plugin.
std::shared_ptr<Transport> grpc_transport();
// gRPC from the first of `paths` that loads (what grpc_transport() does, for tests).
std::shared_ptr<Transport> load_grpc_transport(const std::vector<std::string>& paths);
// A transport of its own servers: a channel reaches the servers started by the same
// transport object only.
std::shared_ptr<Transport> in_process_transport();
// Tests: a network that drops between the clients and the in-process server at `target`.
// Each stream open to it now ends on the client's side with UNAVAILABLE, while its
// handler goes on: its writes succeed and are lost, and the client's cancel does not
// reach it (the server's stop does). Returns how many streams it cut.
int sever_in_process_streams(Transport& transport, const std::string& target);

}  // namespace dataecho::service
