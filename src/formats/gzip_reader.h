// GzipSniffingReader: the bytes of a ByteStream, inflated when they start with the gzip
// magic (1f 8b), passed through otherwise. Concatenated gzip members are read one after
// another, as gzip(1) does. Each read of the stream asks for up to 256 KiB and inflates
// what the stream returns, so over a slow link bytes are decoded as they arrive (the
// sniff waits only for the 2 magic bytes), not once a whole chunk is in. Buffers one such
// chunk of gzip data; plain data is read straight into the caller's memory after the
// sniffed bytes (at most 64 KiB). Errors: a dataecho::Error (stage "gzip", kDataLoss)
// naming the stream's URI and the compressed byte offset. A ByteStream itself
// (position() counts decompressed bytes) that cannot seek. Not thread-safe.
#pragma once

#include <zlib.h>

#include <memory>
#include <vector>

#include "dataecho/io/byte_stream.h"

namespace dataecho {

class GzipSniffingReader : public ByteStream {
 public:
  explicit GzipSniffingReader(std::unique_ptr<ByteStream> stream);
  ~GzipSniffingReader() override;
  GzipSniffingReader(const GzipSniffingReader&) = delete;
  GzipSniffingReader& operator=(const GzipSniffingReader&) = delete;

  // Up to n bytes of the (decompressed) data; 0 only at the end.
  size_t read(void* dst, size_t n) override;
  uint64_t position() const override { return position_; }
  void seek(uint64_t offset) override;          // throws: a gzip stream is read front to back
  int64_t size() const override { return -1; }  // not known before the end
  const std::string& uri() const override { return stream_->uri(); }
  bool compressed() const { return gzip_; }
  // Bytes of the underlying stream consumed so far.
  uint64_t compressed_position() const { return stream_->position() - (in_.size() - in_pos_); }

 private:
  // Up to `bytes` of the stream into in_, as many as it returns once it has returned
  // `at_least` (or ended); false at its end.
  bool fill(size_t bytes, size_t at_least = 1);
  size_t read_some(void* dst, size_t n);
  uint64_t position_ = 0;
  std::unique_ptr<ByteStream> stream_;
  bool gzip_ = false;
  bool z_init_ = false;
  bool member_done_ = false;
  z_stream z_{};
  std::vector<unsigned char> in_;
  size_t in_pos_ = 0;
};

}  // namespace dataecho
