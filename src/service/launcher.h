// The dispatcher's launcher (docs/service.md, "Launching workers"): it starts workers
// through the command the user names (`--launch TEMPLATE`, run by /bin/sh -c with
// {dispatcher}, {host}, {index} and {exe} put in, shell-quoted) or, by default, as local
// `dataecho worker` processes, and keeps the number of serving workers at the target that
// SetWorkers (`dataecho service scale`) sets. Scaling down asks the newest launched
// workers to leave (they finish the pieces they hold and exit); it never kills, and
// workers it did not launch count toward the target but are never asked to leave by it.
// A launched process tells which launch it is by DATAECHO_LAUNCH_INDEX (its environment,
// or `--launch-index` where the environment does not reach it); the token reaches it in
// DATAECHO_SERVICE_TOKEN, never on a command line. A launch that exits before its worker
// registers, or whose worker does not register in time, is reported (its exit status
// and the last line of its standard error) and tried again at most `retries` times
// before the launcher stops until the target is set again.
//
// The decisions (step) are pure: processes come from an injected Processes and the time
// from an injected clock, so that tests drive them with fakes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dataecho/proto/service.pb.h"
#include "dataecho/service/service.h"

namespace dataecho::service {

// A command to start: argv exec'd as is, with `env` added to the dispatcher's environment.
struct LaunchCommand {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string shown;  // as the status shows it (never the token)
  std::string label;  // "launch 3": its output's prefix on the dispatcher's standard error
};

// How a launched process ended.
struct ProcessExit {
  int status = 0;         // its exit status, or 128 + the signal that ended it
  std::string last_line;  // the last line of its standard error
};

// Starts and watches processes. The real one forks and execs (posix_processes()); tests
// give a fake.
class Processes {
 public:
  virtual ~Processes() = default;
  // Starts the command; its pid. Throws an Error when it cannot start.
  virtual int64_t start(const LaunchCommand& command) = 0;
  // nullopt while it runs, else how it ended (once reaped, asked again: the same).
  virtual std::optional<ProcessExit> poll(int64_t pid) = 0;
};
// Processes forked from the calling thread (which must live as long as they should: the
// children get SIGTERM when it ends), their standard output and error read by poll() and
// written to the dispatcher's standard error, each line prefixed "launch N: ". Not
// thread-safe: one thread starts and polls.
std::shared_ptr<Processes> posix_processes();

// `template_text` with {dispatcher}, {host}, {index} and {exe} replaced by their values,
// each shell-quoted ('...'); other braces are left as written.
std::string expand_template(const std::string& template_text, const std::string& dispatcher,
                            const std::string& host, int64_t index, const std::string& exe);

class Launcher {
 public:
  // `bind` and `port`: where the dispatcher listens (the workers' {dispatcher} unless
  // options.advertise says otherwise); `token`: put in the launched processes' environment.
  Launcher(LaunchOptions options, std::string bind, int port, std::string token,
           std::shared_ptr<Processes> processes, std::function<int64_t()> now_ms);

  // The number of serving workers to keep (SetWorkers), with why; refuses a negative one
  // or one over max_workers. A new target clears the failed launches' count.
  void set_target(int64_t n, const std::string& reason);
  // A worker registered saying it is launch `index`: true when it is to leave at once
  // (asked while it was starting).
  bool registered(int64_t index, int64_t worker);
  // One round: reaps exits, times out launches that have not registered, then launches or
  // picks workers to leave. `workers`: those the dispatcher knows, true where serving
  // (alive and not leaving); a launched worker it does not know yet (registered since)
  // counts as serving. Returns the workers to ask to leave.
  std::vector<int64_t> step(const std::map<int64_t, bool>& workers);
  // The workers serving now that count toward the target (after the last step).
  int64_t counted() const;
  // For the status.
  LaunchStatus status() const;

  // The command of launch `index` (its host round robin over the hosts).
  LaunchCommand command(int64_t index, const std::string& host) const;
  // The host of launch `index`: of the --hosts, the first with the fewest launches whose
  // process runs (starting, serving or leaving), looking from the round robin's turn.
  std::string host(int64_t index) const;

 private:
  struct Launched {
    int64_t index = 0;
    std::string host;
    std::string shown;
    int64_t pid = 0;
    int64_t started_ms = 0;
    int64_t exited_ms = 0;     // when the exit was seen (0: not yet)
    int64_t worker = 0;        // the worker it became (0: not registered)
    bool leave_asked = false;  // scaled down
    bool leave_sent = false;   // the order went to the dispatcher
    bool failed = false;       // it did not register (it exited, or not in time)
    std::string why;           // failed: why
    std::optional<ProcessExit> exit;
  };
  void reap(Launched& l);
  bool active(const Launched& l, const std::map<int64_t, bool>& workers) const;
  int64_t count(const std::map<int64_t, bool>& workers) const;
  void launch_one();
  void scale_down(int64_t over, const std::map<int64_t, bool>& workers);
  std::vector<int64_t> due_orders();
  std::string worker_dispatcher(bool local) const;
  static LaunchedWorker status_of(const Launched& l, int64_t now);

  const LaunchOptions o_;
  const std::string bind_;
  const int port_;
  const std::string token_;
  const std::shared_ptr<Processes> processes_;
  const std::function<int64_t()> now_ms_;
  mutable std::mutex mu_;
  int64_t target_ = -1;  // -1: none set (nothing launched)
  std::string reason_;
  int64_t failures_ = 0;  // failed launches since the target was set
  int64_t counted_ = 0;
  std::string note_;
  std::vector<Launched> launched_;
};

// Runs the launcher's step every 200 ms, and at once when woken, on a thread of its own:
// the one that forks the launches. When it ends (the dispatcher stops, or its process
// dies) the launched processes still running get SIGTERM (Linux's parent-death signal):
// a local worker takes it as a request to leave.
class LaunchLoop {
 public:
  // `workers`: the dispatcher's workers, true where serving (Launcher::step);
  // `ask_to_leave`: tells the dispatcher to ask that worker to leave.
  LaunchLoop(Launcher& launcher, std::function<std::map<int64_t, bool>()> workers,
             std::function<void(int64_t worker)> ask_to_leave);
  ~LaunchLoop();
  void wake();

 private:
  void run();

  Launcher& launcher_;
  const std::function<std::map<int64_t, bool>()> workers_;
  const std::function<void(int64_t)> ask_to_leave_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dataecho::service
