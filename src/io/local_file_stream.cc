// LocalFileStream: a ByteStream over a local file, read through a read-ahead buffer of
// StreamOptions::buffer_bytes (reads of 64 KiB or more, once the buffer is drained, bypass
// it and go straight into the caller's memory). seek() moves the file offset and drops the buffer.
// Errors: a dataecho::Error (stage "io") naming the path and the operating system's reason.
// Not thread-safe: one reader per stream.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {
namespace {

constexpr size_t kDirectReadBytes = 64 << 10;

class LocalFileStream : public ByteStream {
 public:
  LocalFileStream(std::string path, std::string uri, const StreamOptions& options)
      : path_(std::move(path)), uri_(std::move(uri)), stats_(options.stats) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      int err = errno;
      throw Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo, "io",
                  std::string("cannot open: ") + std::strerror(err), uri_);
    }
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      throw Error(ErrorCode::kIo, "io", std::string("cannot stat: ") + std::strerror(err), uri_);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd_);
      throw Error(ErrorCode::kInvalidArgument, "io", "is a directory, not a file", uri_);
    }
    size_ = S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : -1;
    buffer_bytes_ = std::max<size_t>(options.buffer_bytes, 1);
#ifdef POSIX_FADV_SEQUENTIAL
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  }
  ~LocalFileStream() override {
    if (fd_ >= 0) ::close(fd_);
  }

  size_t read(void* dst, size_t n) override {
    if (n == 0) return 0;
    size_t avail = end_ - begin_;
    if (avail == 0) {
      // Large reads (a whole record) go straight to the caller's memory: one copy, not two.
      if (n >= std::min<size_t>(buffer_bytes_, kDirectReadBytes)) {
        size_t got = sys_read(dst, n);
        position_ += got;
        return got;
      }
      // Allocated on the first small read: a reader that only makes large ones (the
      // TFRecord reader's 1 MiB chunks) never pays for it.
      if (buffer_.empty()) buffer_.resize(buffer_bytes_);
      begin_ = 0;
      end_ = sys_read(buffer_.data(), buffer_.size());
      avail = end_;
      if (avail == 0) return 0;
    }
    size_t k = std::min(n, avail);
    std::memcpy(dst, buffer_.data() + begin_, k);
    begin_ += k;
    position_ += k;
    return k;
  }

  uint64_t position() const override { return position_; }

  void seek(uint64_t offset) override {
    if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
      throw Error(ErrorCode::kIo, "io",
                  "cannot seek to byte " + std::to_string(offset) + ": " + std::strerror(errno),
                  uri_);
    }
    begin_ = end_ = 0;
    position_ = offset;
  }

  int64_t size() const override { return size_; }
  const std::string& uri() const override { return uri_; }

 private:
  size_t sys_read(void* dst, size_t n) {
    for (;;) {
      ssize_t r = ::read(fd_, dst, n);
      if (r >= 0) {
        if (stats_ && r > 0) stats_->counter("io_bytes").fetch_add(r, std::memory_order_relaxed);
        return static_cast<size_t>(r);
      }
      if (errno == EINTR) continue;
      throw Error(ErrorCode::kIo, "io",
                  "read failed at byte " + std::to_string(position_) + ": " + std::strerror(errno),
                  uri_);
    }
  }

  std::string path_, uri_;
  std::shared_ptr<NodeStats> stats_;
  int fd_ = -1;
  int64_t size_ = -1;
  uint64_t position_ = 0;
  size_t buffer_bytes_ = 0;
  std::vector<char> buffer_;  // buffer_bytes_ once allocated
  size_t begin_ = 0, end_ = 0;
};

}  // namespace

// Declared in open_stream.cc, the only caller.
std::unique_ptr<ByteStream> open_local_stream(const std::string& uri,
                                              const StreamOptions& options) {
  std::string path = uri;
  if (path.rfind("file://", 0) == 0) path = path.substr(7);
  return std::make_unique<LocalFileStream>(std::move(path), uri, options);
}

}  // namespace dataecho
