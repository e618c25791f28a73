// What the tests that run the project's programs as processes share: a command started as
// a job of its own, and the (id, epoch) pairs of a checkpoint's read set.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

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

}  // namespace process_testing
