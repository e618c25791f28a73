#include "service/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "dataecho/core/error.h"

extern char** environ;

namespace dataecho::service {
namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool wildcard(const std::string& bind) {
  return bind.empty() || bind == "0.0.0.0" || bind == "::" || bind == "[::]";
}

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dataecho") : p.string();
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("localhost");
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// One process's output: lines written to the dispatcher's standard error with its label;
// standard error's last line kept.
struct Output {
  int fd = -1;
  bool is_stderr = false;
  std::string pending;
};

class PosixProcesses final : public Processes {
 public:
  ~PosixProcesses() override {
    for (auto& [pid, p] : procs_)
      for (Output& o : p.outputs) close(o.fd);
  }

  int64_t start(const LaunchCommand& c) override {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw_error(ErrorCode::kIo, "launch", "pipe failed");
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      throw_error(ErrorCode::kIo, "launch", "pipe failed");
    }
    const pid_t pid = fork_exec(c, out[1], err[1]);
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
      close(out[0]);
      close(err[0]);
      throw_error(ErrorCode::kIo, "launch", "fork failed for " + c.shown);
    }
    Proc& p = procs_[pid];
    p.label = c.label;
    p.outputs = {{out[0], false, ""}, {err[0], true, ""}};
    for (Output& o : p.outputs) fcntl(o.fd, F_SETFL, fcntl(o.fd, F_GETFL) | O_NONBLOCK);
    return pid;
  }

  std::optional<ProcessExit> poll(int64_t pid) override {
    auto it = procs_.find(pid);
    if (it == procs_.end()) return ProcessExit{-1, "(not started here)"};
    Proc& p = it->second;
    if (p.exit) return p.exit;
    int status = 0;
    const bool ended = waitpid(static_cast<pid_t>(pid), &status, WNOHANG) == pid;
    for (Output& o : p.outputs) pump(p, o, ended);
    if (!ended) return std::nullopt;
    p.exit =
        ProcessExit{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), p.last_line};
    for (Output& o : p.outputs) close(o.fd);
    p.outputs.clear();
    return p.exit;
  }

 private:
  struct Proc {
    std::string label;
    std::vector<Output> outputs;
    std::string last_line;
    std::optional<ProcessExit> exit;
  };

  // Forks; the child gets SIGTERM when this thread ends, and execs `c` with its standard
  // output and error on the pipes, its environment the dispatcher's with c.env set.
  static pid_t fork_exec(const LaunchCommand& c, int out, int err) {
    std::map<std::string, std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : c.env) env[k] = v;
    std::vector<std::string> env_text;
    for (const auto& [k, v] : env) env_text.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : env_text) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid != 0) return pid;
    // The child: async-signal-safe calls only.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    sigset_t none;  // the dispatcher blocks its stop signals; the command gets them
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }

  // Reads what the pipe holds (to its end once the process has ended), writing whole
  // lines to standard error.
  static void pump(Proc& p, Output& o, bool ended) {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(o.fd, buf, sizeof(buf));
      if (n <= 0) break;
      o.pending.append(buf, static_cast<size_t>(n));
    }
    for (size_t nl; (nl = o.pending.find('\n')) != std::string::npos;) {
      say(p, o, o.pending.substr(0, nl));
      o.pending.erase(0, nl + 1);
    }
    if (ended && !o.pending.empty()) {
      say(p, o, o.pending);
      o.pending.clear();
    }
  }

  static void say(Proc& p, const Output& o, const std::string& line) {
    std::cerr << p.label << ": " << line << "\n";
    if (o.is_stderr && !line.empty()) p.last_line = line;
  }

  std::map<int64_t, Proc> procs_;
};

}  // namespace

std::shared_ptr<Processes> posix_processes() { return std::make_shared<PosixProcesses>(); }

std::string expand_template(const std::string& t, const std::string& dispatcher,
                            const std::string& host, int64_t index, const std::string& exe) {
  const std::pair<std::string, std::string> fields[] = {
      {"{dispatcher}", shell_quote(dispatcher)},
      {"{host}", shell_quote(host)},
      {"{index}", shell_quote(std::to_string(index))},
      {"{exe}", shell_quote(exe)}};
  std::string out;
  for (size_t i = 0; i < t.size();) {
    bool field = false;
    for (const auto& [name, value] : fields)
      if (t.compare(i, name.size(), name) == 0) {
        out += value;
        i += name.size();
        field = true;
        break;
      }
    if (!field) out += t[i++];
  }
  return out;
}

Launcher::Launcher(LaunchOptions options, std::string bind, int port, std::string token,
                   std::shared_ptr<Processes> processes, std::function<int64_t()> now_ms)
    : o_(std::move(options)),
      bind_(std::move(bind)),
      port_(port),
      token_(std::move(token)),
      processes_(std::move(processes)),
      now_ms_(std::move(now_ms)) {}

std::string Launcher::worker_dispatcher(bool local) const {
  const std::string port = std::to_string(port_);
  if (!o_.advertise.empty())
    return o_.advertise.find(':') == std::string::npos ? o_.advertise + ":" + port : o_.advertise;
  if (!wildcard(bind_)) return bind_ + ":" + port;
  return (local ? std::string("127.0.0.1") : host_name()) + ":" + port;
}

std::string Launcher::host(int64_t index) const {
  if (o_.hosts.empty()) return "localhost";
  std::map<std::string, int64_t> running;
  for (const Launched& l : launched_)
    if (l.pid > 0 && !l.exit) ++running[l.host];
  const size_t n = o_.hosts.size();
  size_t best = static_cast<size_t>(index - 1) % n;
  for (size_t k = 1; k < n; ++k) {
    const size_t i = (static_cast<size_t>(index - 1) + k) % n;
    if (running[o_.hosts[i]] < running[o_.hosts[best]]) best = i;
  }
  return o_.hosts[best];
}

LaunchCommand Launcher::command(int64_t index, const std::string& host) const {
  LaunchCommand c;
  c.label = "launch " + std::to_string(index);
  c.env = {{"DATAECHO_LAUNCH_INDEX", std::to_string(index)}};
  if (!token_.empty()) c.env.emplace_back("DATAECHO_SERVICE_TOKEN", token_);
  const std::string exe = o_.exe.empty() ? self_exe() : o_.exe;
  if (!o_.launch.empty()) {
    c.shown = expand_template(o_.launch, worker_dispatcher(false), host, index, exe);
    c.argv = {"/bin/sh", "-c", c.shown};
    return c;
  }
  c.argv = {exe, "worker", "--dispatcher", worker_dispatcher(true)};
  if (!wildcard(bind_)) c.argv.insert(c.argv.end(), {"--bind", bind_});
  if (!o_.tls_cert_file.empty())
    c.argv.insert(c.argv.end(), {"--tls-cert", o_.tls_cert_file, "--tls-key", o_.tls_key_file});
  if (!o_.ca_file.empty()) c.argv.insert(c.argv.end(), {"--ca-file", o_.ca_file});
  c.shown = join(c.argv);
  return c;
}

void Launcher::set_target(int64_t n, const std::string& reason) {
  if (n < 0)
    throw_error(ErrorCode::kInvalidArgument, "launch",
                "a number of workers is 0 or more, not " + std::to_string(n));
  if (n > o_.max_workers)
    throw_error(ErrorCode::kInvalidArgument, "launch",
                "at most " + std::to_string(o_.max_workers) +
                    " workers (the dispatcher's --max-workers), not " + std::to_string(n));
  std::lock_guard lock(mu_);
  target_ = n;
  reason_ = reason;
  failures_ = 0;
  note_.clear();
}

bool Launcher::registered(int64_t index, int64_t worker) {
  std::lock_guard lock(mu_);
  for (Launched& l : launched_) {
    if (l.index != index || l.exit) continue;
    l.worker = worker;
    l.failed = false;  // registered late: it serves after all
    l.why.clear();
    if (!l.leave_asked) return false;
    l.leave_sent = true;
    return true;
  }
  return false;
}

void Launcher::reap(Launched& l) {
  if (l.exit) return;
  if (l.pid > 0) l.exit = processes_->poll(l.pid);
  if (l.exit) l.exited_ms = now_ms_();
  if (l.worker != 0 || l.failed) return;
  if (l.exit) {
    l.failed = true;
    l.why =
        "exited with status " + std::to_string(l.exit->status) + " before its worker registered";
    ++failures_;
  } else if (now_ms_() - l.started_ms > static_cast<int64_t>(o_.register_timeout_s * 1000)) {
    l.failed = true;
    std::ostringstream why;
    why << "its worker did not register within " << o_.register_timeout_s
        << " s (the process runs on)";
    l.why = why.str();
    ++failures_;
  }
}

bool Launcher::active(const Launched& l, const std::map<int64_t, bool>& workers) const {
  if (l.exit || l.leave_asked || l.failed) return false;
  if (l.worker == 0) return true;  // starting
  const auto w = workers.find(l.worker);
  return w == workers.end() || w->second;
}

int64_t Launcher::count(const std::map<int64_t, bool>& workers) const {
  int64_t n = 0;
  std::set<int64_t> mine;
  for (const Launched& l : launched_) {
    if (l.worker != 0) mine.insert(l.worker);
    if (active(l, workers)) ++n;
  }
  for (const auto& [worker, serving] : workers)
    if (serving && !mine.count(worker)) ++n;
  return n;
}

void Launcher::launch_one() {
  Launched l;
  l.index = static_cast<int64_t>(launched_.size()) + 1;
  l.host = host(l.index);
  const LaunchCommand c = command(l.index, l.host);
  l.shown = c.shown;
  l.started_ms = now_ms_();
  try {
    l.pid = processes_->start(c);
  } catch (const std::exception& e) {
    l.failed = true;
    l.why = "cannot start: " + std::string(e.what());
    ++failures_;
  }
  launched_.push_back(std::move(l));
}

void Launcher::scale_down(int64_t over, const std::map<int64_t, bool>& workers) {
  for (auto it = launched_.rbegin(); it != launched_.rend() && over > 0; ++it)
    if (active(*it, workers)) {
      it->leave_asked = true;
      --over;
    }
  if (over > 0)
    note_ = std::to_string(over) +
            " worker(s) above the target that the dispatcher did not launch: it asks only "
            "those it launched to leave";
}

std::vector<int64_t> Launcher::due_orders() {
  std::vector<int64_t> orders;
  for (Launched& l : launched_)
    if (l.leave_asked && !l.leave_sent && l.worker != 0 && !l.exit) {
      l.leave_sent = true;
      orders.push_back(l.worker);
    }
  return orders;
}

std::vector<int64_t> Launcher::step(const std::map<int64_t, bool>& workers) {
  std::lock_guard lock(mu_);
  for (Launched& l : launched_) reap(l);
  counted_ = count(workers);
  if (target_ >= 0 && counted_ > target_) scale_down(counted_ - target_, workers);
  for (int64_t n = counted_; target_ >= 0 && n < target_; ++n) {
    if (failures_ > o_.retries) {
      note_ = "launching stopped after " + std::to_string(failures_) +
              " failed launches (retries: " + std::to_string(o_.retries) +
              "): set the target again (`dataecho service scale`) to try again";
      break;
    }
    launch_one();
  }
  counted_ = count(workers);  // with the launches just started
  if (target_ >= 0 && counted_ <= target_ && failures_ <= o_.retries) note_.clear();
  return due_orders();
}

int64_t Launcher::counted() const {
  std::lock_guard lock(mu_);
  return counted_;
}

LaunchedWorker Launcher::status_of(const Launched& l, int64_t now) {
  LaunchedWorker w;
  w.set_index(l.index);
  w.set_host(l.host);
  w.set_command(l.shown);
  w.set_pid(l.pid);
  w.set_worker(l.worker);
  w.set_age_ms(now - l.started_ms);
  w.set_why(l.why);
  if (l.exit) {
    w.set_exited(true);
    w.set_exit_status(l.exit->status);
    w.set_last_line(l.exit->last_line);
    w.set_ran_ms(l.exited_ms - l.started_ms);
  }
  w.set_state(l.failed        ? "failed"
              : l.exit        ? "exited"
              : l.leave_asked ? "leaving"
              : l.worker != 0 ? "running"
                              : "starting");
  return w;
}

LaunchStatus Launcher::status() const {
  std::lock_guard lock(mu_);
  LaunchStatus s;
  s.set_launcher(o_.launch.empty() ? "local" : o_.launch);
  s.set_target(target_);
  s.set_reason(reason_);
  s.set_max_workers(o_.max_workers);
  s.set_retries(o_.retries);
  s.set_counted(counted_);
  s.set_failures(failures_);
  s.set_note(note_);
  const int64_t now = now_ms_();
  for (const Launched& l : launched_) *s.add_launched() = status_of(l, now);
  return s;
}

LaunchLoop::LaunchLoop(Launcher& launcher, std::function<std::map<int64_t, bool>()> workers,
                       std::function<void(int64_t)> ask_to_leave)
    : launcher_(launcher), workers_(std::move(workers)), ask_to_leave_(std::move(ask_to_leave)) {
  thread_ = std::thread([this] { run(); });
}

LaunchLoop::~LaunchLoop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void LaunchLoop::wake() {
  std::lock_guard lock(mu_);
  woken_ = true;
  cv_.notify_all();
}

void LaunchLoop::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    try {
      for (int64_t worker : launcher_.step(workers_())) ask_to_leave_(worker);
    } catch (const std::exception& e) {
      std::cerr << "launch: " << e.what() << "\n";
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return woken_ || stopping_; });
    woken_ = false;
  }
}

}  // namespace dataecho::service
