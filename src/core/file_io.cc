#include "dataecho/core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dataecho/core/error.h"

namespace dataecho {

namespace {

// Writes all of `bytes` to `fd` and syncs it; false with errno set on a failure.
bool write_all_and_sync(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return ::fsync(fd) == 0;
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& stage) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(ErrorCode::kIo, stage,
                std::string("cannot write ") + tmp + ": " + std::strerror(errno), path);
  const bool written = write_all_and_sync(fd, bytes);
  const int write_errno = errno;
  if (::close(fd) != 0 || !written) {
    const int e = written ? errno : write_errno;
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kIo, stage, std::string("cannot write ") + tmp + ": " + std::strerror(e),
                path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kIo, stage,
                std::string("cannot rename ") + tmp + " over it: " + std::strerror(e), path);
  }
}

}  // namespace dataecho
