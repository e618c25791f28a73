// The data service (docs/service.md): a dispatcher that keeps the jobs and the workers,
// workers that run a job's upstream pipeline and stream its elements, and the trainer's
// `service` source that reads them. This header is the service layer's interface to the
// layers above: the spec layer starts workers with its pipeline builder injected
// (dataecho/spec/service.h) and builds the `service` source; the CLI starts the
// processes (`dataecho dispatcher`, `dataecho worker`, `dataecho service status`).
//
// Sharding "off": every worker builds the whole upstream once per job and epoch, its
// seed salted by its worker number, and streams its own pass; a consumer reads every
// worker's pass. No element is exactly once across workers.
// Sharding "dynamic": the dispatcher cuts the upstream's source into pieces once per job
// (the injected PlanFn: the elastic plan), deals them to lanes per epoch, and leases a
// consumer's pieces to the workers that read for it; consumer r of N owns the lanes k
// with k mod N == r. A worker reads a piece through the upstream's element-wise stages
// from the record its lease starts at. The consumer counts the records it kept of each
// piece; when a stream breaks it cancels it and releases that worker's leases at those
// counts, so a piece re-leased goes on exactly where it stopped: each record's element
// once per epoch, whichever workers fail.
//
// The token (docs/service.md, Security) comes from a file or DATAECHO_SERVICE_TOKEN,
// never from the command line, a spec or a log line; TLS (TlsOptions) encrypts the
// calls, the token's metadata among them, when the servers have a certificate.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/autoscale.h"
#include "dataecho/core/dataset.h"
#include "dataecho/core/pipeline.h"

namespace dataecho::service {

class Transport;  // the service layer's transport (gRPC, or in process for tests)

// The transport that dispatchers, workers and service sources use when their options
// give none: gRPC (its plugin loaded on first use) unless set_default_transport() chose
// another for this process (tests: the in-process transport).
std::shared_ptr<Transport> default_transport();
void set_default_transport(std::shared_ptr<Transport> transport);

// The service token: the first line of `token_file` when it is not empty (an error
// names `what` and the file when it cannot be read or is empty), else
// $DATAECHO_SERVICE_TOKEN, else "" (no token).
std::string read_token(const std::string& token_file, const std::string& what);

// TLS (docs/service.md, Security), as PEM text; all empty: plaintext. A server serves TLS
// with a certificate and its key; a client speaks TLS when it has roots, trusts them
// alone, and checks that the server's certificate names the address it dials (or
// `server_name` when given).
struct TlsOptions {
  std::string cert_pem;     // servers: the certificate (chain)
  std::string key_pem;      // servers: its private key
  std::string root_pem;     // clients: the CAs trusted
  std::string server_name;  // clients: the name the certificate must carry ("": the host dialled)
};

// A server's certificate and key from the files of `cert_flag` and `key_flag` (the
// flags' names, for errors): both or neither ("" and "": plaintext); an error names the
// one missing, or a file that cannot be read or holds no PEM certificate / private key.
TlsOptions read_server_tls(const std::string& cert_file, const std::string& key_file,
                           const std::string& cert_flag = "--tls-cert",
                           const std::string& key_flag = "--tls-key");
// A client's roots: the PEM file `ca_file` and the PEM files (*.pem, *.crt) of the
// folder `ca_path`, joined ("" and "": plaintext). Errors name the option (`ca_file_what`,
// `ca_path_what`) and the file or folder.
std::string read_ca_roots(const std::string& ca_file, const std::string& ca_path,
                          const std::string& ca_file_what = "ca_file",
                          const std::string& ca_path_what = "ca_path");

// A job's pieces (sharding "dynamic"), as the PlanFn makes them of its upstream's
// source: `pieces[p]` the record ranges of piece p in read order, `lanes_of(epoch)` the
// lane of each piece in that epoch, `json` what the journal keeps.
struct JobPlan {
  std::vector<std::vector<RecordRange>> pieces;
  std::function<std::vector<int32_t>(int64_t epoch)> lanes_of;
  std::string json;
};
// Makes the plan of `upstream_json`'s source in `lanes` lanes. Injected by the spec layer.
using PlanFn =
    std::function<std::shared_ptr<const JobPlan>(const std::string& upstream_json, int lanes)>;

// How the dispatcher starts workers (docs/service.md, "Launching workers"): SetWorkers
// (`dataecho service scale`) sets how many serve; the dispatcher launches workers up to
// that and asks the newest it launched to leave above it.
struct LaunchOptions {
  // The command, run by /bin/sh -c with {dispatcher}, {host}, {index} and {exe}
  // put in, shell-quoted ("": local `dataecho worker` processes, the dispatcher's own binary).
  std::string launch;
  std::vector<std::string> hosts;  // {host}, round robin over the launches ("localhost" when none)
  int64_t max_workers = 16;        // the most workers a target may name
  int64_t retries = 2;             // failed launches tried again before launching stops
  double register_timeout_s = 60;  // a launch whose worker has not registered by then failed
  std::string advertise;  // HOST[:PORT] the workers reach the dispatcher at ("": see launcher.h)
  // Passed to local workers: the dispatcher's certificate and key (they serve TLS with
  // them) and the CA file they check the dispatcher's certificate with.
  std::string tls_cert_file, tls_key_file, ca_file;
  std::string exe;  // the dataecho binary of local workers and {exe} ("": this process's)
};

struct DispatcherOptions {
  std::string bind = "0.0.0.0";
  int port = 0;                          // 0: any free port (Dispatcher::port() says which)
  std::string journal_dir;               // "": the state is kept in memory only
  std::string token;                     // "": calls need none
  int64_t worker_timeout_ms = 10'000;    // a worker silent this long is not listed for new jobs
  PlanFn plan;                           // null: sharding "dynamic" is refused
  TlsOptions tls;                        // its certificate and key ("": plaintext)
  std::shared_ptr<Transport> transport;  // null: default_transport()
  LaunchOptions launch;
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;  // stops
  virtual int port() const = 0;
  // The journal's warnings at start (a torn last record dropped), and its file.
  virtual const std::vector<std::string>& journal_warnings() const = 0;
  virtual std::string journal_path() const = 0;
  virtual void stop() = 0;
};

std::unique_ptr<Dispatcher> start_dispatcher(const DispatcherOptions& options);

// Builds a job's upstream on a worker: the pipeline of `upstream_json` (a JSON pipeline
// spec) for pass `epoch`, its seed salted by the worker's number and the epoch, within
// `threads` cores (0: the pipeline's own budget). Injected by the spec layer.
using UpstreamBuilder = std::function<std::unique_ptr<Pipeline>(
    const std::string& upstream_json, int64_t worker, int64_t epoch, int threads)>;

// The source of one lease of a piece: `source`'s record ranges from record `from` of the
// piece on (the records before it read and dropped, never passed on), each element
// with the ids a full read gives it. `records` (may be null) gets, in order, each
// element's id and its record in the piece, so that the worker can number what the
// upstream's element-wise stages make of them.
struct RecordTap {
  std::mutex mu;
  std::deque<std::pair<int64_t, int64_t>> read;  // (id, record in the piece)
};
DatasetPtr make_piece_source(std::shared_ptr<const Dataset> source, std::vector<RecordRange> ranges,
                             int64_t from, std::shared_ptr<RecordTap> records);

// Builds a lease's pipeline on a worker (sharding "dynamic"): the upstream's stages of
// `upstream_json` over piece_source(the upstream's source), for pass `epoch`, within
// `threads` cores. Injected by the spec layer.
using PieceBuilder = std::function<std::unique_ptr<Pipeline>(
    const std::string& upstream_json, int64_t epoch, int threads,
    const std::function<DatasetPtr(std::shared_ptr<const Dataset> source)>& piece_source)>;

// What a worker's fault hook does: nothing, end the stream with an error (the worker
// lives on), or kill the worker (every stream ends with an error, it serves nothing more).
enum class Fault { kNone, kCutStream, kKill };

struct WorkerOptions {
  std::string dispatcher;  // host:port
  std::string bind = "0.0.0.0";
  int port = 0;           // its Read server's port (0: any)
  std::string advertise;  // host[:port] consumers reach it at ("": see worker.cc)
  int threads = 0;
  std::string token;
  double connect_timeout_s = 30;  // for its first beat
  int64_t launch_index = 0;       // the dispatcher's launch it is (0: not launched by it)
  int64_t beat_ms = 500;
  // Its Read server's certificate and key, and the roots (and name) it checks the
  // dispatcher's certificate with ("": plaintext).
  TlsOptions tls;
  UpstreamBuilder builder;
  PieceBuilder piece_builder;            // null: sharding "dynamic" is refused
  std::shared_ptr<Transport> transport;  // null: default_transport()
  // Tests' fault injection: called at "lease" (a piece leased, before its first frame),
  // "frame" (after each frame of elements), "ahead" (the next piece leased ahead, at 90%
  // of the current one) and "done" (every element of the piece sent, before its
  // PIECE_DONE) of a sharding "dynamic" or "static" stream.
  std::function<Fault(const std::string& point, int64_t piece)> fault;
};

class Worker {
 public:
  virtual ~Worker() = default;         // stops
  virtual int64_t number() const = 0;  // given by the dispatcher at its first beat
  virtual int port() const = 0;
  virtual const std::string& address() const = 0;  // as advertised
  // Leaving gracefully: drain() (a SIGTERM's, or the dispatcher's order by a beat's
  // reply) makes the worker take no new lease or stream and tell the dispatcher; its
  // streams finish the pieces they hold (sharding "off": their passes) and then end, each
  // consumer releasing nothing and reading on from the other workers. draining() says
  // whether it is leaving, open_streams() how many streams it still serves; stop() after
  // a drain tells the dispatcher that it has left.
  virtual void drain() = 0;
  virtual bool draining() const = 0;
  virtual int64_t open_streams() const = 0;
  virtual void stop() = 0;
};

// Starts the Read server and registers with the dispatcher (its first beat, retried up
// to connect_timeout_s); throws naming the dispatcher when that fails.
std::unique_ptr<Worker> start_worker(const WorkerOptions& options);

// The `service` source's options, as its spec builder reads them.
struct ServiceSourceOptions {
  std::string dispatcher;        // host:port
  std::string job;               // the job's name
  std::string upstream_json;     // the upstream pipeline's spec, seeded
  std::string fingerprint;       // of the upstream
  std::string sharding = "off";  // "off", "dynamic" or "static"
  int lanes = 12;                // dynamic: the plan's lanes
  int consumers = 1;             // dynamic: N, which must divide the lanes
  int consumer = 0;              // dynamic: this one's r
  int64_t epoch = 0;             // the job's epoch of iteration 0 (iteration i: epoch + i)
  int64_t buffer_mb = 64;        // the elements read ahead from all workers together
  std::string token;
  double connect_timeout_s = 30;
  TlsOptions tls;  // the roots (and name) it checks the dispatcher's and workers' certificates with
  std::shared_ptr<Transport> transport;  // null: default_transport()
  // The decision loop (core/autoscale.h: "scale"'s policy "workers" or "echo_or_scale"),
  // handed to the pipeline's tuner by each iterator; null: "fixed".
  std::shared_ptr<ScalePolicy> scale;
};

// A source of the elements the job's workers stream: at each iteration (an epoch, as a
// trainer-side repeat counts them, after the options' `epoch`) it gets or creates the job
// at the dispatcher, reads every worker's pass of that epoch, and ends when all have
// ended; the elements' rows carry that epoch. Errors name the worker ("worker w2
// (10.0.0.5:41071) cannot build the upstream: ...").
DatasetPtr make_service_source(ServiceSourceOptions options);

// The dispatcher's status (Status call) as JSON: {"dispatcher", "version", "journal",
// "jobs": [{"job", "name", "fingerprint", "sharding", "epochs": [{"epoch", "pieces",
// "done", "leased", "pending"}]}], "workers": [{"worker", "address", "version",
// "threads", "last_beat_s", "alive", "state", "elements", "bytes", "rate", "pieces"}]}.
// A dynamic job lists its epochs opened, its pieces by status; a worker's "state" is
// "alive", "silent", "leaving" or "left", "rate" its elements a second over the last
// interval of a second or more, "pieces" the leases it was given. "launch": the
// launcher's {"launcher", "target" (null: none set), "reason", "max_workers", "retries",
// "counted", "failures", "note", "launched": [{"index", "host", "command", "pid",
// "state", "worker", "why", "age_s", and once exited "exit_status", "last_line"}]}.
nlohmann::json service_status(const std::string& dispatcher, const std::string& token,
                              double timeout_s, std::shared_ptr<Transport> transport = nullptr,
                              const TlsOptions& tls = {});
// The same for a person: a line per job and per worker.
std::string status_text(const nlohmann::json& status);
// Stops the running job `name` (`dataecho service stop-job`): its name is free for
// another upstream, and workers are no longer given it. Returns its id.
int64_t stop_job(const std::string& dispatcher, const std::string& name, const std::string& token,
                 double timeout_s, std::shared_ptr<Transport> transport = nullptr,
                 const TlsOptions& tls = {});

// Tells a worker ("w3", "3" or its address) to leave (`dataecho service stop-worker`):
// by its next beat's reply it takes no new lease or stream, finishes the pieces it holds,
// and exits once its streams have ended; the dispatcher gives it no new lease from now.
struct StoppedWorker {
  int64_t worker = 0;
  std::string address;
};
StoppedWorker stop_worker(const std::string& dispatcher, const std::string& worker,
                          const std::string& token, double timeout_s,
                          std::shared_ptr<Transport> transport = nullptr,
                          const TlsOptions& tls = {});

// Sets how many workers the dispatcher keeps serving (`dataecho service scale`): it
// launches workers up to `workers` and asks the newest it launched to leave above it
// (workers it did not launch count, and are never asked). Returns the target and how
// many count now.
struct ScaledWorkers {
  int64_t target = 0;
  int64_t counted = 0;
};
ScaledWorkers set_workers(const std::string& dispatcher, int64_t workers, const std::string& token,
                          double timeout_s, std::shared_ptr<Transport> transport = nullptr,
                          const TlsOptions& tls = {});

}  // namespace dataecho::service
