#include "s3_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace dataecho::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kBootstrap = "run scripts/bootstrap.sh";
constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kCommandTimeout = std::chrono::seconds(10);

std::string source_path(const std::string& relative) {
  return std::string(DATAECHO_SOURCE_DIR) + "/" + relative;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The program `name` on $PATH, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Node.js and the server's npm packages as scripts/bootstrap.sh installs them: the
// program to run, or a std::runtime_error saying what is missing.
std::string node_for(const std::string& server_dir) {
  std::string node = find_on_path("node");
  if (node.empty()) {
    throw std::runtime_error(
        std::string("the S3 test server needs node (Node.js), which is not on ") +
        "PATH: " + kBootstrap + " (it installs nodejs)");
  }
  const std::string modules = server_dir + "/node_modules";
  if (!fs::exists(modules + "/@20minutes/s3rver/package.json")) {
    throw std::runtime_error(modules + " has no @20minutes/s3rver: " + kBootstrap +
                             " (it runs npm ci in tests/s3/server)");
  }
  if (read_text(modules + "/.dataecho-lock") != read_text(server_dir + "/package-lock.json")) {
    throw std::runtime_error(modules + " was not installed from the current package-lock.json: " +
                             kBootstrap + " (it runs npm ci in tests/s3/server)");
  }
  return node;
}

// Runs `argv` tied to this thread (spawn_tied), stderr appended to `log_path`, stdout
// (and stdin when `control`: a socket pair for both) to the returned descriptor.
std::pair<pid_t, int> spawn(const std::vector<std::string>& argv, const std::string& log_path,
                            bool control) {
  int fds[2];
  if ((control ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) : pipe2(fds, O_CLOEXEC)) !=
      0) {
    throw std::runtime_error("cannot make a pipe for " + argv[0]);
  }
  // pipe2: fds[0] reads; a socket pair: either end does both (the child takes fds[1]).
  const int ours = fds[0], theirs = fds[1];
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = spawn_tied(argv, {control ? theirs : -1, theirs, log});
  if (log >= 0) close(log);
  close(theirs);
  return {pid, ours};
}

// The next line (without its newline) from `fd`, waiting until `deadline`; nullopt at
// the end of the stream or the deadline. `pending` keeps what was read past the line.
std::optional<std::string> read_line(int fd, std::string& pending, Clock::time_point deadline) {
  for (;;) {
    auto nl = pending.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return std::nullopt;
    pending.append(buf, static_cast<size_t>(n));
  }
}

void kill_and_wait(pid_t& pid, int& fd) {
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  if (fd >= 0) {
    close(fd);
    fd = -1;
  }
}

// Reads the child's "listening 127.0.0.1:PORT" line; kills it and throws with its log
// when it does not come.
int await_listening(const std::string& what, pid_t& pid, int& fd, const std::string& log_path) {
  std::string pending;
  auto line = read_line(fd, pending, Clock::now() + kStartTimeout);
  const std::string prefix = "listening 127.0.0.1:";
  if (line && line->rfind(prefix, 0) == 0) return std::stoi(line->substr(prefix.size()));
  kill_and_wait(pid, fd);
  throw std::runtime_error(what + (line ? " printed \"" + *line + "\"" : " did not start") +
                           " instead of its listening line; its stderr: " + read_text(log_path));
}

}  // namespace

S3Server::~S3Server() { stop(); }

void S3Server::start(const S3ServerOptions& options) {
  stop();
  options_ = options;
  if (options_.server_dir.empty()) options_.server_dir = source_path("tests/s3/server");
  if (options_.directory.empty()) options_.directory = temp_dir() + "/store";
  fs::create_directories(options_.directory);
  log_path_ = temp_dir() + "/s3_server.log";
  port_ = options_.port;
  launch();
}

void S3Server::launch() {
  // The server makes its listings' continuation tokens with DES, which OpenSSL 3 (under
  // Node.js 20, and Debian's Node.js 18) keeps in its legacy provider: without it every
  // truncated listing (more than max-keys, at most 1,000) is a 500 InternalError.
  std::vector<std::string> argv = {node_for(options_.server_dir),
                                   "--openssl-legacy-provider",
                                   options_.server_dir + "/start.js",
                                   "--directory",
                                   options_.directory,
                                   "--port",
                                   std::to_string(port_),
                                   "--access-key-id",
                                   options_.access_key_id,
                                   "--secret-access-key",
                                   options_.secret_access_key};
  // A port just freed by a killed server is normally free at once (Node.js listens with
  // SO_REUSEADDR); a few tries cover a slow release.
  for (int attempt = 0;; ++attempt) {
    std::tie(pid_, stdout_fd_) = spawn(argv, log_path_, false);
    try {
      port_ = await_listening("the S3 test server (node tests/s3/server/start.js)", pid_,
                              stdout_fd_, log_path_);
      return;
    } catch (const std::runtime_error&) {
      if (port_ == 0 || attempt >= 4) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

void S3Server::stop() { kill_and_wait(pid_, stdout_fd_); }

void S3Server::restart() {
  stop();
  launch();
}

std::string S3Server::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

FixturesRun run_fixtures(const std::string& endpoint, const std::string& access_key_id,
                         const std::string& secret_access_key,
                         const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3",    source_path("tests/s3/fixtures.py"),
                                   "--endpoint",          endpoint,
                                   "--access-key-id",     access_key_id,
                                   "--secret-access-key", secret_access_key};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log_path = temp_dir() + "/fixtures.log";
  auto [pid, fd] = spawn(argv, log_path, false);
  FixturesRun run;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) run.output.append(buf, n);
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.output += read_text(log_path);
  return run;
}

void S3Server::create_bucket(const std::string& bucket) const {
  auto run = run_fixtures(endpoint(), access_key_id(), secret_access_key(), {"bucket", bucket});
  if (run.status != 0) {
    throw std::runtime_error("fixtures.py bucket " + bucket + " failed: " + run.output);
  }
}

void S3Server::upload(const std::string& bucket, const std::string& path,
                      const std::string& key) const {
  auto run =
      run_fixtures(endpoint(), access_key_id(), secret_access_key(), {"put", bucket, path, key});
  if (run.status != 0) {
    throw std::runtime_error("fixtures.py put " + bucket + " " + path + " failed: " + run.output);
  }
}

std::string ProxiedRequest::header(const std::string& name) const {
  for (const auto& [n, v] : headers) {
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return std::tolower(a) == std::tolower(b);
        })) {
      return v;
    }
  }
  return "";
}

S3FaultProxy::~S3FaultProxy() { stop(); }

void S3FaultProxy::start(int upstream_port) {
  stop();
  log_path_ = temp_dir() + "/fault_proxy.log";
  pending_.clear();
  std::tie(pid_, control_fd_) = spawn({"/usr/bin/python3", source_path("tests/s3/fault_proxy.py"),
                                       "--upstream", "127.0.0.1:" + std::to_string(upstream_port)},
                                      log_path_, true);
  port_ =
      await_listening("the fault proxy (tests/s3/fault_proxy.py)", pid_, control_fd_, log_path_);
}

void S3FaultProxy::stop() { kill_and_wait(pid_, control_fd_); }

std::string S3FaultProxy::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::string S3FaultProxy::command(const std::string& json_line) {
  if (pid_ <= 0) throw std::runtime_error("the fault proxy is not running");
  const std::string line = json_line + "\n";
  if (send(control_fd_, line.data(), line.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("cannot write to the fault proxy: " + read_text(log_path_));
  }
  auto answer = read_line(control_fd_, pending_, Clock::now() + kCommandTimeout);
  if (!answer) throw std::runtime_error("the fault proxy did not answer: " + read_text(log_path_));
  auto j = nlohmann::json::parse(*answer);
  if (j.contains("error")) {
    throw std::runtime_error("the fault proxy refused " + json_line + ": " +
                             j["error"].get<std::string>());
  }
  return *answer;
}

void S3FaultProxy::fault(const S3Fault& f) {
  nlohmann::json j = {{"fault", f.kind},
                      {"path", f.path},
                      {"times", f.times},
                      {"region", f.region},
                      {"bytes", f.bytes}};
  if (!f.method.empty()) j["method"] = f.method;
  if (!f.query.empty()) j["query"] = f.query;
  command(j.dump());
}

std::vector<ProxiedRequest> S3FaultProxy::requests() {
  auto j = nlohmann::json::parse(command(R"({"log": true})"));
  std::vector<ProxiedRequest> out;
  for (const auto& r : j.at("requests")) {
    ProxiedRequest p;
    p.method = r.at("method").get<std::string>();
    p.target = r.at("target").get<std::string>();
    p.answer = r.at("answer").get<std::string>();
    for (const auto& h : r.at("headers")) p.headers.emplace_back(h.at(0), h.at(1));
    out.push_back(std::move(p));
  }
  return out;
}

void S3FaultProxy::clear() { command(R"({"clear": true})"); }

}  // namespace dataecho::testing
