// What the service's processes share: the default transport, the token, serving and
// making calls, the status's text.
#include "service/calls.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "dataecho/service/service.h"

namespace dataecho::service {
namespace {

std::mutex& transport_mutex() {
  static std::mutex m;
  return m;
}
std::shared_ptr<Transport>& chosen_transport() {
  static std::shared_ptr<Transport> t;
  return t;
}

CallCode call_code_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kDataLoss:
    case ErrorCode::kOutOfRange:
      return CallCode::kInvalidArgument;
    case ErrorCode::kNotFound:
      return CallCode::kNotFound;
    case ErrorCode::kCancelled:
      return CallCode::kCancelled;
    case ErrorCode::kIo:
      return CallCode::kUnavailable;
    case ErrorCode::kInternal:
      return CallCode::kInternal;
  }
  return CallCode::kUnknown;
}

}  // namespace

std::shared_ptr<Transport> default_transport() {
  {
    std::lock_guard lock(transport_mutex());
    if (chosen_transport()) return chosen_transport();
  }
  return grpc_transport();
}

void set_default_transport(std::shared_ptr<Transport> transport) {
  std::lock_guard lock(transport_mutex());
  chosen_transport() = std::move(transport);
}

std::string read_token(const std::string& token_file, const std::string& what) {
  if (token_file.empty()) {
    const char* env = std::getenv("DATAECHO_SERVICE_TOKEN");
    return env == nullptr ? "" : env;
  }
  std::ifstream in(token_file);
  std::string line;
  if (!in || !std::getline(in, line))
    throw_error(ErrorCode::kNotFound, "service",
                what + ": cannot read the token file " + token_file);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  if (line.empty())
    throw_error(ErrorCode::kInvalidArgument, "service",
                what + ": the token file " + token_file + " has no token on its first line");
  return line;
}

std::string token_refusal(const Caller& caller, const std::string& server_role,
                          const std::string& target, bool had_token) {
  const std::string where = caller.token_source + " or DATAECHO_SERVICE_TOKEN";
  if (!had_token)
    return "the " + server_role + " at " + target + " needs a token and this " + caller.role +
           " has none (give " + where + ")";
  return "the " + server_role + " at " + target + " refused this " + caller.role +
         "'s token (check " + where + ")";
}

std::string serve_unary(const std::function<std::string()>& body) {
  try {
    return body();
  } catch (const CallError&) {
    throw;
  } catch (const Error& e) {
    throw CallError(call_code_of(e.code()), e.message());
  }
}

void retry_unreachable(double timeout_s, const std::string& target,
                       const std::function<void(int64_t deadline_ms)>& attempt,
                       const std::function<bool()>& stopped) {
  retry_unreachable_until(std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
                          timeout_s, target, attempt, stopped);
}

void retry_unreachable_until(std::chrono::steady_clock::time_point end, double timeout_s,
                             const std::string& target,
                             const std::function<void(int64_t deadline_ms)>& attempt,
                             const std::function<bool()>& stopped) {
  using Clock = std::chrono::steady_clock;
  std::string why;
  for (;;) {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    try {
      attempt(std::max<int64_t>(left, 1));
      return;
    } catch (const CallError& e) {
      if (e.call_code() != CallCode::kUnavailable && e.call_code() != CallCode::kDeadlineExceeded)
        throw;
      // A connection's failure says more than the deadline of the try that followed it.
      if (e.call_code() == CallCode::kUnavailable || why.empty()) why = e.detail();
    }
    if (Clock::now() + std::chrono::milliseconds(200) >= end) {
      std::ostringstream s;
      s << "cannot reach the dispatcher at " << target << " within " << timeout_s << " s (" << why
        << ")";
      throw_error(ErrorCode::kIo, "service", s.str());
    }
    for (int i = 0; i < 4; ++i) {
      if (stopped && stopped()) throw_error(ErrorCode::kCancelled, "service", "stopped");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::string sharding_name(JobSpec::Sharding sharding) {
  switch (sharding) {
    case JobSpec::OFF:
      return "off";
    case JobSpec::STATIC:
      return "static";
    default:
      return "dynamic";
  }
}

namespace {

nlohmann::json launch_json(const LaunchStatus& s) {
  nlohmann::json launched = nlohmann::json::array();
  for (const LaunchedWorker& l : s.launched()) {
    nlohmann::json one = {
        {"index", l.index()},     {"host", l.host()},
        {"command", l.command()}, {"pid", l.pid()},
        {"state", l.state()},     {"worker", l.worker()},
        {"why", l.why()},         {"age_s", static_cast<double>(l.age_ms()) / 1000.0}};
    if (l.exited()) {
      one["exit_status"] = l.exit_status();
      one["last_line"] = l.last_line();
      one["ran_s"] = static_cast<double>(l.ran_ms()) / 1000.0;
    }
    launched.push_back(one);
  }
  return {{"launcher", s.launcher()},
          {"target", s.target() < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.target())},
          {"reason", s.reason()},
          {"max_workers", s.max_workers()},
          {"retries", s.retries()},
          {"counted", s.counted()},
          {"failures", s.failures()},
          {"note", s.note()},
          {"launched", launched}};
}

}  // namespace

nlohmann::json service_status(const std::string& dispatcher, const std::string& token,
                              double timeout_s, std::shared_ptr<Transport> transport,
                              const TlsOptions& tls) {
  if (!transport) transport = default_transport();
  auto channel = transport->open_channel(dispatcher, client_transport(tls));
  CallOptions o{.deadline_ms = static_cast<int64_t>(timeout_s * 1000), .token = token};
  const auto reply = call_unary<StatusRequest, StatusReply>(
      *channel, kStatus, StatusRequest(), o, {"status client", "--token-file"}, "dispatcher");
  nlohmann::json j = {{"dispatcher", dispatcher},
                      {"version", reply.hello().version()},
                      {"journal", reply.journal()},
                      {"jobs", nlohmann::json::array()},
                      {"workers", nlohmann::json::array()}};
  for (const JobStatus& s : reply.jobs()) {
    nlohmann::json epochs = nlohmann::json::array();
    for (const EpochStatus& e : s.epochs())
      epochs.push_back({{"epoch", e.epoch()},
                        {"pieces", e.pieces()},
                        {"done", e.done()},
                        {"leased", e.leased()},
                        {"pending", e.pending()}});
    j["jobs"].push_back({{"job", s.job()},
                         {"name", s.name()},
                         {"fingerprint", s.fingerprint()},
                         {"sharding", sharding_name(s.sharding())},
                         {"epochs", epochs}});
  }
  for (const WorkerInfo& w : reply.workers())
    j["workers"].push_back({{"worker", w.worker()},
                            {"address", w.address()},
                            {"version", w.version()},
                            {"threads", w.threads()},
                            {"last_beat_s", static_cast<double>(w.beat_age_ms()) / 1000.0},
                            {"alive", w.beat_age_ms() <= reply.worker_timeout_ms()},
                            {"state", w.state()},
                            {"elements", w.elements()},
                            {"bytes", w.bytes()},
                            {"rate", w.rate()},
                            {"pieces", w.pieces()}});
  j["launch"] = launch_json(reply.launch());
  return j;
}

int64_t stop_job(const std::string& dispatcher, const std::string& name, const std::string& token,
                 double timeout_s, std::shared_ptr<Transport> transport, const TlsOptions& tls) {
  if (!transport) transport = default_transport();
  auto channel = transport->open_channel(dispatcher, client_transport(tls));
  StopJobRequest request;
  request.set_name(name);
  CallOptions o{.deadline_ms = static_cast<int64_t>(timeout_s * 1000), .token = token};
  try {
    return call_unary<StopJobRequest, StopJobReply>(*channel, kStopJob, request, o,
                                                    {"status client", "--token-file"}, "dispatcher")
        .job();
  } catch (const CallError& e) {
    throw Error(
        ErrorCode::kInvalidArgument, "service",
        "the dispatcher at " + dispatcher + " cannot stop job '" + name + "': " + e.detail());
  }
}

StoppedWorker stop_worker(const std::string& dispatcher, const std::string& worker,
                          const std::string& token, double timeout_s,
                          std::shared_ptr<Transport> transport, const TlsOptions& tls) {
  if (!transport) transport = default_transport();
  auto channel = transport->open_channel(dispatcher, client_transport(tls));
  StopWorkerRequest request;
  request.set_worker(worker);
  CallOptions o{.deadline_ms = static_cast<int64_t>(timeout_s * 1000), .token = token};
  try {
    const auto reply = call_unary<StopWorkerRequest, StopWorkerReply>(
        *channel, kStopWorker, request, o, {"status client", "--token-file"}, "dispatcher");
    return {reply.worker(), reply.address()};
  } catch (const CallError& e) {
    throw Error(
        ErrorCode::kInvalidArgument, "service",
        "the dispatcher at " + dispatcher + " cannot stop worker '" + worker + "': " + e.detail());
  }
}

ScaledWorkers set_workers(const std::string& dispatcher, int64_t workers, const std::string& token,
                          double timeout_s, std::shared_ptr<Transport> transport,
                          const TlsOptions& tls) {
  if (!transport) transport = default_transport();
  auto channel = transport->open_channel(dispatcher, client_transport(tls));
  SetWorkersRequest request;
  request.set_workers(workers);
  CallOptions o{.deadline_ms = static_cast<int64_t>(timeout_s * 1000), .token = token};
  try {
    const auto reply = call_unary<SetWorkersRequest, SetWorkersReply>(
        *channel, kSetWorkers, request, o, {"status client", "--token-file"}, "dispatcher");
    return {reply.target(), reply.counted()};
  } catch (const CallError& e) {
    throw Error(ErrorCode::kInvalidArgument, "service",
                "the dispatcher at " + dispatcher + " cannot keep " + std::to_string(workers) +
                    " workers: " + e.detail());
  }
}

namespace {

std::string fixed(double v, int precision) {
  std::ostringstream out;
  out.precision(precision);
  out << std::fixed << v;
  return out.str();
}

void job_text(std::ostringstream& out, const nlohmann::json& j) {
  out << "  job " << j["job"] << " '" << j["name"].get<std::string>() << "' sharding "
      << j["sharding"].get<std::string>() << ", upstream " << j["fingerprint"].get<std::string>()
      << "\n";
  for (const auto& e : j.value("epochs", nlohmann::json::array()))
    out << "    epoch " << e["epoch"] << ": " << e["pieces"] << " pieces, " << e["done"]
        << " done, " << e["leased"] << " leased, " << e["pending"] << " pending\n";
}

void worker_text(std::ostringstream& out, const nlohmann::json& w) {
  const std::string state =
      w.value("state", std::string(w["alive"].get<bool>() ? "alive" : "silent"));
  out << "  w" << w["worker"] << " " << w["address"].get<std::string>() << " (dataecho "
      << w["version"].get<std::string>() << ", threads " << w["threads"] << "): " << state
      << ", last beat " << fixed(w["last_beat_s"].get<double>(), 1) << " s ago, " << w["elements"]
      << " elements (" << fixed(w.value("rate", 0.0), 1) << "/s), " << w.value("pieces", 0)
      << " pieces, " << w["bytes"] << " bytes sent\n";
}

// The launcher's target and its launches, when a target was set or anything launched.
void launch_text(std::ostringstream& out, const nlohmann::json& l) {
  if (l["target"].is_null() && l["launched"].empty()) return;
  out << "launcher " << l["launcher"].get<std::string>() << ": target "
      << (l["target"].is_null() ? std::string("none") : l["target"].dump()) << " worker(s) ("
      << l["reason"].get<std::string>() << "; at most " << l["max_workers"] << "), " << l["counted"]
      << " counted, " << l["launched"].size() << " launch(es), " << l["failures"] << " failed\n";
  if (!l["note"].get<std::string>().empty()) out << "  " << l["note"].get<std::string>() << "\n";
  for (const auto& w : l["launched"]) {
    out << "  launch " << w["index"] << " on " << w["host"].get<std::string>() << " (pid "
        << w["pid"] << "): " << w["state"].get<std::string>();
    if (w["worker"].get<int64_t>() != 0) out << " as w" << w["worker"];
    if (w.contains("exit_status")) out << ", exit status " << w["exit_status"];
    if (!w["why"].get<std::string>().empty()) out << ": " << w["why"].get<std::string>();
    if (!w.value("last_line", "").empty()) out << " (\"" << w.value("last_line", "") << "\")";
    out << "\n    " << w["command"].get<std::string>() << "\n";
  }
}

}  // namespace

std::string status_text(const nlohmann::json& s) {
  std::ostringstream out;
  out << "dispatcher " << s.value("dispatcher", "") << " (dataecho " << s.value("version", "")
      << "), journal: "
      << (s.value("journal", "").empty() ? "none (memory only)" : s.value("journal", "")) << "\n";
  out << s["jobs"].size() << " job(s)\n";
  for (const auto& j : s["jobs"]) job_text(out, j);
  out << s["workers"].size() << " worker(s)\n";
  for (const auto& w : s["workers"]) worker_text(out, w);
  if (s.contains("launch")) launch_text(out, s["launch"]);
  return out.str();
}

}  // namespace dataecho::service
