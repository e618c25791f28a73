#include "launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dataecho/core/error.h"

extern char** environ;

namespace dataecho::cli {
namespace {

constexpr const char* kStage = "train --nproc";

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kIo, kStage, message); }

// A TCP port that is free on 127.0.0.1 now (the kernel picks it). Another process could
// take it before rank 0 listens; rank 0 then fails with "the port is in use".
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    fail("cannot find a free port on 127.0.0.1: " + why);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::vector<std::string> own_command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t at = 0;
  while (at < all.size()) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (args.empty()) fail("cannot read this process's command line (/proc/self/cmdline)");
  return args;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// The environment of rank `r`: this process's, with the job's variables set anew.
std::vector<std::string> rank_environment(int r, int nproc, int port, double timeout_seconds) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "LOCAL_RANK" || key == "WORLD_SIZE" || key == "MASTER_ADDR" ||
        key == "MASTER_PORT" || key == kLaunchedRankVariable || key == "DATAECHO_DIST_TIMEOUT")
      continue;
    env_strings.push_back(kv);
  }
  env_strings.push_back("RANK=" + std::to_string(r));
  env_strings.push_back("LOCAL_RANK=" + std::to_string(r));
  env_strings.push_back("WORLD_SIZE=" + std::to_string(nproc));
  env_strings.push_back("MASTER_ADDR=127.0.0.1");
  env_strings.push_back("MASTER_PORT=" + std::to_string(port));
  env_strings.push_back("DATAECHO_DIST_TIMEOUT=" + std::to_string(timeout_seconds));
  env_strings.push_back(std::string(kLaunchedRankVariable) + "=1");
  return env_strings;
}

// Waits for every rank; after the first failure, gives the others `patience_seconds`
// (their timeout and a grace) to notice and exit, then kills them. The first rank that
// failed (-1: none) and how, then the other ranks that a signal ended, not the launcher's
// (they could not print a message of their own).
struct RanksEnded {
  int first_failed = -1;
  std::string how;
  std::string also_signalled;  // "rank 1 was killed by signal 13 (Broken pipe)", ...
};

RanksEnded wait_for_ranks(const std::vector<pid_t>& pids, double patience_seconds) {
  std::vector<bool> running(pids.size(), true);
  size_t left = pids.size();
  bool killed_by_launcher = false;
  RanksEnded ended;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (left > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid || !running[r]) continue;
        running[r] = false;
        --left;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && ended.first_failed < 0) {
          ended.first_failed = static_cast<int>(r);
          ended.how = describe_status(status);
          deadline = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(patience_seconds * 1000));
        } else if (WIFSIGNALED(status) && !killed_by_launcher) {
          ended.also_signalled += "; rank " + std::to_string(r) + " " + describe_status(status);
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR && errno != ECHILD) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (size_t r = 0; r < pids.size(); ++r)
        if (running[r]) ::kill(pids[r], SIGKILL);
      killed_by_launcher = true;
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ended;
}

extern "C" void ignore_in_launcher(int) {}

}  // namespace

void launch_local_ranks(int nproc, double timeout_seconds, double grace_seconds) {
  const int port = free_port();
  const std::vector<std::string> args = own_command_line();
  std::vector<char*> argv;
  for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);

  // Ctrl-C reaches every rank (one process group): each checkpoints and stops at the same
  // step. The launcher only waits. A handler, not SIG_IGN, so the ranks get the default.
  struct sigaction sa {};
  sa.sa_handler = ignore_in_launcher;
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> env_strings = rank_environment(r, nproc, port, timeout_seconds);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int rc =
        ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      fail("cannot start rank " + std::to_string(r) + ": " + std::strerror(rc));
    }
    pids.push_back(pid);
  }

  const RanksEnded ended = wait_for_ranks(pids, timeout_seconds + grace_seconds);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (ended.first_failed >= 0)
    fail("rank " + std::to_string(ended.first_failed) + " of " + std::to_string(nproc) + " " +
         ended.how + ended.also_signalled + " (the ranks' own messages are above)");
}

}  // namespace dataecho::cli
