// TfRecordReader (see dataecho/formats/tfrecord.h).
#include <algorithm>
#include <cstring>

#include "dataecho/formats/crc32c.h"
#include "dataecho/formats/tfrecord.h"

namespace dataecho {
namespace {

uint64_t load_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t load_u32(const unsigned char* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

}  // namespace

const char* TfRecordReader::status_reason(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kEnd:
      return "end of data";
    case Status::kBadDataCrc:
      return "bad data CRC";
    case Status::kBadLengthCrc:
      return "bad length CRC (corrupt record length)";
    case Status::kTruncated:
      return "truncated record";
  }
  return "?";
}

TfRecordReader::TfRecordReader(std::unique_ptr<ByteStream> stream, Options options)
    : stream_(std::move(stream)), options_(options) {
  offset_ = record_offset_ = stream_->position();
}
TfRecordReader::TfRecordReader(std::unique_ptr<ByteStream> stream)
    : TfRecordReader(std::move(stream), Options{}) {}

void TfRecordReader::seek(uint64_t offset) {
  stream_->seek(offset);
  chunk_begin_ = chunk_end_ = 0;
  offset_ = record_offset_ = offset;
  dead_ = false;
}

uint64_t TfRecordReader::bytes_after_record_start() {
  int64_t size = stream_->size();
  if (size >= 0)
    return static_cast<uint64_t>(size) > record_offset_
               ? static_cast<uint64_t>(size) - record_offset_
               : 0;
  // Unknown size (a chunked HTTP response): count what is left. The stream's position
  // already counts what the chunk holds.
  char buf[64 << 10];
  while (stream_->read(buf, sizeof buf) > 0) {
  }
  return stream_->position() - record_offset_;
}

size_t TfRecordReader::take(unsigned char* dst, size_t n, uint32_t* crc) {
  size_t done = 0;
  while (done < n) {
    size_t avail = chunk_end_ - chunk_begin_;
    if (avail == 0) {
      size_t left = n - done;
      if (left >= kChunkBytes / 2) {
        // A large body: straight from the stream into its buffer (one copy, by the
        // kernel for a local file), then the CRC over it.
        size_t got = stream_->read_fully(dst + done, left);
        if (crc != nullptr) *crc = crc32c::extend(*crc, dst + done, got);
        return done + got;
      }
      if (!chunk_) chunk_ = std::make_unique_for_overwrite<unsigned char[]>(kChunkBytes);
      chunk_begin_ = 0;
      chunk_end_ = stream_->read(chunk_.get(), kChunkBytes);
      if (chunk_end_ == 0) return done;
      avail = chunk_end_;
    }
    size_t k = std::min(n - done, avail);
    const unsigned char* src = chunk_.get() + chunk_begin_;
    if (crc != nullptr) {
      *crc = crc32c::extend_copy(*crc, dst + done, src, k);
    } else {
      std::memcpy(dst + done, src, k);
    }
    chunk_begin_ += k;
    done += k;
  }
  return done;
}

TfRecordReader::Status TfRecordReader::next(std::shared_ptr<Buffer>* record) {
  if (dead_) return Status::kEnd;
  record_offset_ = offset_;
  unsigned char header[12];
  size_t got = take(header, sizeof header, nullptr);
  if (got == 0) return Status::kEnd;
  if (got < sizeof header) {
    dead_ = true;
    return Status::kTruncated;
  }
  uint64_t length = load_u64(header);
  if (options_.verify_crc && crc32c::unmask(load_u32(header + 8)) != crc32c::value(header, 8)) {
    dead_ = true;
    return Status::kBadLengthCrc;
  }
  int64_t size = stream_->size();
  uint64_t body_start = record_offset_ + sizeof header;
  if (size >= 0) {
    uint64_t left =
        static_cast<uint64_t>(size) > body_start ? static_cast<uint64_t>(size) - body_start : 0;
    if (length > left || left - length < 4) {
      dead_ = true;
      return Status::kTruncated;
    }
  } else if (length > options_.max_record_bytes) {
    dead_ = true;
    return Status::kBadLengthCrc;
  }
  auto buf = Buffer::allocate(static_cast<size_t>(length));
  uint32_t crc = 0;
  auto* body = reinterpret_cast<unsigned char*>(buf->mutable_data());
  if (take(body, length, options_.verify_crc ? &crc : nullptr) < length) {
    dead_ = true;
    return Status::kTruncated;
  }
  unsigned char footer[4];
  if (take(footer, 4, nullptr) < 4) {
    dead_ = true;
    return Status::kTruncated;
  }
  offset_ = body_start + length + 4;
  if (options_.verify_crc && crc32c::unmask(load_u32(footer)) != crc) return Status::kBadDataCrc;
  *record = std::move(buf);
  return Status::kOk;
}

}  // namespace dataecho
