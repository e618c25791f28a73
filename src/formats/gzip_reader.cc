#include "gzip_reader.h"

#include <cstring>

#include "dataecho/core/error.h"

namespace dataecho {

namespace {
// The most one read of the stream asks for: the stream answers with what it has (a
// network stream with what has arrived), and that is inflated at once.
constexpr size_t kGzipChunk = 256 << 10;
// The first read, which tells gzip from plain data: up to as many bytes as a local file's
// read that bypasses its read-ahead buffer (src/io/local_file_stream.cc), so that sniffing
// does not make the stream allocate that buffer. It waits only for the 2 magic bytes.
constexpr size_t kSniffBytes = 64 << 10;
constexpr size_t kMagicBytes = 2;
}  // namespace

GzipSniffingReader::GzipSniffingReader(std::unique_ptr<ByteStream> stream)
    : stream_(std::move(stream)) {
  fill(kSniffBytes, kMagicBytes);
  gzip_ = in_.size() >= kMagicBytes && in_[0] == 0x1f && in_[1] == 0x8b;
  if (gzip_) {
    if (inflateInit2(&z_, 15 + 16) != Z_OK) {
      throw Error(ErrorCode::kInternal, "gzip", "inflateInit2 failed", uri());
    }
    z_init_ = true;
  }
}

GzipSniffingReader::~GzipSniffingReader() {
  if (z_init_) inflateEnd(&z_);
}

bool GzipSniffingReader::fill(size_t bytes, size_t at_least) {
  in_.resize(bytes);
  in_pos_ = 0;
  size_t got = 0;
  try {
    got = stream_->read_at_least(in_.data(), bytes, at_least);
  } catch (...) {
    // A refill asks for one read, so nothing was taken from the stream and a later read
    // goes on from where it stood; the sniff's throw leaves the constructor.
    in_.clear();
    throw;
  }
  in_.resize(got);
  return got > 0;
}

size_t GzipSniffingReader::read(void* dst, size_t n) {
  size_t got = read_some(dst, n);
  position_ += got;
  return got;
}

size_t GzipSniffingReader::read_some(void* dst, size_t n) {
  if (n == 0) return 0;
  if (!gzip_) {
    // Plain data: the sniffed bytes, then straight from the stream into the caller's
    // memory (no copy, no chunk held).
    if (in_pos_ == in_.size()) {
      if (in_.capacity() > 0) std::vector<unsigned char>().swap(in_);
      in_pos_ = 0;
      return stream_->read(dst, n);
    }
    size_t k = std::min(n, in_.size() - in_pos_);
    std::memcpy(dst, in_.data() + in_pos_, k);
    in_pos_ += k;
    return k;
  }
  for (;;) {
    if (in_pos_ == in_.size() && !fill(kGzipChunk)) {
      if (!member_done_) {
        throw Error(ErrorCode::kDataLoss, "gzip",
                    "truncated gzip data (ends inside a compressed block)",
                    uri() + " at byte " + std::to_string(stream_->position()));
      }
      return 0;
    }
    if (member_done_) {  // another gzip member follows
      if (inflateReset(&z_) != Z_OK)
        throw Error(ErrorCode::kInternal, "gzip", "inflateReset failed", uri());
      member_done_ = false;
    }
    z_.next_in = in_.data() + in_pos_;
    z_.avail_in = static_cast<uInt>(in_.size() - in_pos_);
    z_.next_out = static_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    int rc = inflate(&z_, Z_NO_FLUSH);
    in_pos_ = in_.size() - z_.avail_in;
    size_t produced = std::min<size_t>(n, 1u << 30) - z_.avail_out;
    if (rc == Z_STREAM_END) {
      member_done_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      throw Error(ErrorCode::kDataLoss, "gzip",
                  std::string("corrupt gzip data: ") + (z_.msg ? z_.msg : "inflate error"),
                  uri() + " at byte " + std::to_string(compressed_position()));
    }
    if (produced > 0) return produced;
  }
}

void GzipSniffingReader::seek(uint64_t offset) {
  throw Error(ErrorCode::kInvalidArgument, "gzip",
              "cannot seek to byte " + std::to_string(offset) + " of a gzip stream", uri());
}

}  // namespace dataecho
