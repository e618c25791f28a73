// What the tests that run the project's programs as processes share: a command started as
// a job of its own, a child process whose output is read line by line, a file's text, and
// the (id, epoch) pairs of a checkpoint's read set.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace process_testing {

// Starts `command` through /bin/sh in a child process of its own process group (as a
// terminal starts a job), its output to `log`; returns its pid.
inline pid_t start_job(const std::string& command, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// How a Child ends when it goes out of scope: SIGKILL at once, or SIGTERM and, if it has
// not exited within 5 s, SIGKILL.
enum class Ending { kKill, kTerminate };

// A child process (spawn_tied) whose standard output is a pipe to us and whose standard
// error goes to `log`; ended as `ending` says when it goes out of scope.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log, Ending ending = Ending::kKill)
      : ending_(ending) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = dataecho::testing::spawn_tied(argv, {-1, out[1], err});
    ::close(out[1]);
    ::close(err);
    out_ = out[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && ending_ == Ending::kTerminate) terminate_within(5'000);
    if (pid_ > 0) kill_now();
    ::close(out_);
  }
  // The next line of its output within `seconds`, or nullopt.
  std::optional<std::string> line(double seconds = 20) {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    for (;;) {
      if (const size_t nl = pending_.find('\n'); nl != std::string::npos) {
        std::string l = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(out_, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      pending_.append(buf, static_cast<size_t>(n));
    }
  }
  // SIGKILL, now.
  void kill_now() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Sends SIGTERM and returns the exit status (-1: killed by a signal or not ended in 20 s).
  int terminate() {
    ::kill(pid_, SIGTERM);
    return wait_exit();
  }
  // Its exit status once it exits by itself (-1: killed by a signal or not ended in 20 s).
  int wait_exit() {
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      ::usleep(100'000);
    }
    return -1;
  }

 private:
  // SIGTERM, then waits up to `ms` for it to exit (pid_ -1 once it has).
  void terminate_within(int ms) {
    ::kill(pid_, SIGTERM);
    for (int waited = 0; waited < ms; waited += 50) {
      if (::waitpid(pid_, nullptr, WNOHANG) != 0) {
        pid_ = -1;
        return;
      }
      ::usleep(50'000);
    }
  }

  Ending ending_;
  pid_t pid_ = -1;
  int out_ = -1;
  std::string pending_;
};

// The whole text of the file at `path` ("" if it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The (id, epoch) pairs of a checkpoint's read set (12 bytes each), each as often as the
// file holds it.
inline std::multiset<std::pair<int64_t, int32_t>> read_pairs(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string b = ss.str();
  std::multiset<std::pair<int64_t, int32_t>> s;
  for (size_t at = 0; at + 12 <= b.size(); at += 12) {
    int64_t id;
    int32_t epoch;
    std::memcpy(&id, b.data() + at, 8);
    std::memcpy(&epoch, b.data() + at + 8, 4);
    s.insert({id, epoch});
  }
  return s;
}

// Why a test of the data service's processes over gRPC cannot run in this build ("" when
// it can): it needs the gRPC plugin (TSan builds and builds without libgrpc++-dev have
// none) and the dataecho command (the sanitizer builds have none). The test target
// defines DATAECHO_HAVE_GRPC_PLUGIN and DATAECHO_HAVE_CLI where they exist.
inline std::string service_processes_missing() {
#if !defined(DATAECHO_HAVE_GRPC_PLUGIN)
  return "this build has no gRPC plugin (TSan, or no libgrpc++-dev)";
#elif !defined(DATAECHO_HAVE_CLI)
  return "this build has no dataecho command (DATAECHO_BUILD_CLI=OFF, as in the sanitizer "
         "builds)";
#else
  return "";
#endif
}

}  // namespace process_testing
