// The service's calls as the dispatcher, the workers and the service source make and
// serve them: method names, requests and replies as protobuf messages, each opening
// with a Hello that the other side checks (protocol.h), and the errors a person reads
// (a refused token says where the token comes from).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dataecho/proto/service.pb.h"
#include "dataecho/service/service.h"
#include "service/protocol.h"
#include "service/transport.h"

namespace dataecho::service {

inline const std::string kGetOrCreateJob = "/dataecho.service.Dispatcher/GetOrCreateJob";
inline const std::string kWorkerBeat = "/dataecho.service.Dispatcher/WorkerBeat";
inline const std::string kStatus = "/dataecho.service.Dispatcher/Status";
inline const std::string kStopJob = "/dataecho.service.Dispatcher/StopJob";
inline const std::string kStopWorker = "/dataecho.service.Dispatcher/StopWorker";
inline const std::string kSetWorkers = "/dataecho.service.Dispatcher/SetWorkers";
inline const std::string kGetSplit = "/dataecho.service.Dispatcher/GetSplit";
inline const std::string kPieceDone = "/dataecho.service.Dispatcher/PieceDone";
inline const std::string kRelease = "/dataecho.service.Dispatcher/Release";
inline const std::string kRewind = "/dataecho.service.Dispatcher/Rewind";
inline const std::string kRead = "/dataecho.service.Worker/Read";

// Who calls, for the Hello and the errors: "worker", "consumer", "status client".
struct Caller {
  std::string role;
  std::string token_source;  // where its token comes from: "--token-file", "the spec's token_file"
};

// The text of a refused token: "the dispatcher at HOST:P refused this worker's token
// (check --token-file or DATAECHO_SERVICE_TOKEN)", or that the caller has none.
std::string token_refusal(const Caller& caller, const std::string& server_role,
                          const std::string& target, bool had_token);

// Parses a request; a request that does not parse is refused (INVALID_ARGUMENT).
template <class Message>
Message parse_request(std::string_view bytes, const std::string& method) {
  Message m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw CallError(CallCode::kInvalidArgument, "cannot parse the request of " + method);
  return m;
}

// Runs a handler's body; a dataecho::Error it throws goes back to the caller as a
// CallError of the matching code with the error's message alone.
std::string serve_unary(const std::function<std::string()>& body);

// One unary call: `request` (its Hello set here) to `method`; the reply parsed and its
// Hello checked. A refused token becomes token_refusal()'s Error; any other failure is
// the CallError.
template <class Request, class Reply>
Reply call_unary(Channel& channel, const std::string& method, Request request,
                 const CallOptions& options, const Caller& caller, const std::string& server_role) {
  *request.mutable_hello() = make_hello(caller.role);
  std::string bytes;
  try {
    bytes = channel.unary(method, request.SerializeAsString(), options);
  } catch (const CallError& e) {
    if (e.call_code() == CallCode::kUnauthenticated)
      throw Error(ErrorCode::kInvalidArgument, "service",
                  token_refusal(caller, server_role, channel.target(), !options.token.empty()));
    throw;
  }
  Reply reply;
  if (!reply.ParseFromString(bytes))
    throw_error(ErrorCode::kDataLoss, "service",
                "cannot parse the reply of the " + server_role + " at " + channel.target() +
                    " to " + method);
  check_hello(reply.hello(), channel.target(), caller.role);
  return reply;
}

// Runs `attempt(deadline_ms)` until it returns, again every 200 ms while the dispatcher
// at `target` cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED), each try within the
// time left; after `timeout_s`: "cannot reach the dispatcher at HOST:P within 30 s: ..."
// (the last UNAVAILABLE's reason, else the deadline). Any other failure is thrown at once. `stopped` (may be null) ends
// the waiting early with kCancelled.
void retry_unreachable(double timeout_s, const std::string& target,
                       const std::function<void(int64_t deadline_ms)>& attempt,
                       const std::function<bool()>& stopped = nullptr);
// The same until `end`, a time point of std::chrono::steady_clock (the message still
// says `timeout_s`).
void retry_unreachable_until(std::chrono::steady_clock::time_point end, double timeout_s,
                             const std::string& target,
                             const std::function<void(int64_t deadline_ms)>& attempt,
                             const std::function<bool()>& stopped = nullptr);

// The transport's settings of a client (`tls`'s roots and name) and of a server (its
// certificate and key); the rest the defaults.
TransportOptions client_transport(const TlsOptions& tls);
TransportOptions server_transport(const TlsOptions& tls);

// "off", "dynamic", "static".
std::string sharding_name(JobSpec::Sharding sharding);

}  // namespace dataecho::service
