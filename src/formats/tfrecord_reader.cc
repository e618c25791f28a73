// TfRecordReader (see dataecho/formats/tfrecord.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

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

// A chunk: kChunkBytes of memory and a count of its references, the reader's (while it
// reads into the chunk) plus one per record that views it. The count is ours rather
// than a shared_ptr's so that the reader can see, with an acquire load that orders the
// records' last reads before its next write, that nobody else holds the chunk: it then
// reads on into the same memory, still in cache, instead of switching chunks.
struct TfRecordReader::Chunk {
  std::atomic<int> refs{1};
  unsigned char* mem = nullptr;
};

// Recycles chunks, for every reader in the process: a chunk comes back here when its
// last reference is dropped, in whatever thread that happens. Keeps kSpareChunks.
// Shared by all readers because a pipeline opens shard after shard: a fresh chunk per
// file costs a page fault per 4 KiB (measured: a third of the time of reading a
// 128 MiB file on this VM).
class TfRecordReader::ChunkPool {
 public:
  // Never destroyed: chunks may be released after static destruction began.
  static ChunkPool& instance() {
    static ChunkPool* pool = new ChunkPool();
    return *pool;
  }
  Chunk* get() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        Chunk* c = free_.back();
        free_.pop_back();
        c->refs.store(1, std::memory_order_relaxed);
        return c;
      }
    }
    auto c = std::make_unique<Chunk>();
    c->mem = static_cast<unsigned char*>(std::aligned_alloc(64, kChunkBytes));
    if (c->mem == nullptr) throw std::bad_alloc();
    return c.release();
  }
  static void unref(Chunk* c) {
    if (c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) instance().put(c);
  }

 private:
  void put(Chunk* c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < kSpareChunks) {
        free_.push_back(c);
        return;
      }
    }
    std::free(c->mem);
    delete c;
  }

  std::mutex mu_;
  std::vector<Chunk*> free_;
};

TfRecordReader::TfRecordReader(std::unique_ptr<ByteStream> stream, Options options)
    : stream_(std::move(stream)), options_(options) {
  offset_ = record_offset_ = stream_->position();
}
TfRecordReader::TfRecordReader(std::unique_ptr<ByteStream> stream)
    : TfRecordReader(std::move(stream), Options{}) {}

TfRecordReader::~TfRecordReader() {
  if (chunk_ != nullptr) ChunkPool::unref(chunk_);
}

unsigned char* TfRecordReader::at() const { return chunk_->mem + chunk_begin_; }

std::shared_ptr<Buffer> TfRecordReader::view(size_t nbytes) {
  Chunk* c = chunk_;
  c->refs.fetch_add(1, std::memory_order_relaxed);
  try {
    return Buffer::wrap(
        reinterpret_cast<std::byte*>(at()), nbytes, [c] { ChunkPool::unref(c); }, kChunkBytes);
  } catch (...) {
    ChunkPool::unref(c);
    throw;
  }
}

void TfRecordReader::seek(uint64_t offset) {
  stream_->seek(offset);
  if (chunk_ != nullptr) ChunkPool::unref(chunk_);
  chunk_ = nullptr;
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

size_t TfRecordReader::ensure(size_t n) {
  size_t avail = chunk_end_ - chunk_begin_;
  if (avail >= n) return avail;
  if (chunk_ == nullptr || chunk_begin_ + n > kChunkBytes) {
    // Back to the front of a chunk with what is left of this one. The bytes go where
    // the next read lands at the same offset within a page as in the file: the
    // kernel's copy from the page cache is slower between differently aligned
    // addresses (measured: 10-20% slower reads 16 bytes off).
    constexpr size_t kPageBytes = 4096;
    size_t lead = static_cast<size_t>(stream_->position() - avail) % kPageBytes;
    if (chunk_ != nullptr && chunk_->refs.load(std::memory_order_acquire) == 1) {
      // No record views this chunk any more: the same memory, still in cache.
      std::memmove(chunk_->mem + lead, at(), avail);
    } else {
      // Records still view it: they keep it until they are dropped.
      Chunk* fresh = ChunkPool::instance().get();
      if (avail > 0) std::memcpy(fresh->mem + lead, at(), avail);
      if (chunk_ != nullptr) ChunkPool::unref(chunk_);
      chunk_ = fresh;
    }
    chunk_begin_ = lead;
    chunk_end_ = lead + avail;
  }
  int64_t size = stream_->size();
  while (chunk_end_ - chunk_begin_ < n) {
    // At a known end, no read: a small one would make a local stream set up its buffer.
    if (size >= 0 && stream_->position() >= static_cast<uint64_t>(size)) break;
    size_t want = std::max<size_t>(n - (chunk_end_ - chunk_begin_), kReadBytes);
    size_t got = stream_->read(chunk_->mem + chunk_end_, std::min(want, kChunkBytes - chunk_end_));
    if (got == 0) break;
    chunk_end_ += got;
  }
  return chunk_end_ - chunk_begin_;
}

TfRecordReader::Status TfRecordReader::next(std::shared_ptr<Buffer>* record) {
  // The caller is done with the record it passes back (see the header). Holding it
  // through this call pinned its chunk, so every chunk switch took a fresh one: two
  // chunks alternated, 1 MiB between them, and the kernel's copy and the CRC found
  // their memory outside L2 more often. Measured on the AMD Zen 4 VM, 100 KiB records,
  // the same build with the loop holding the previous record or not: 76.0-80.2% of
  // plain read() against 78.6-83.4% (three runs of ten; docs/formats.md).
  record->reset();
  if (dead_) return Status::kEnd;
  record_offset_ = offset_;
  constexpr size_t kHeader = 12, kFooter = 4;
  size_t got = ensure(kHeader);
  if (got == 0) return Status::kEnd;
  if (got < kHeader) return fail(Status::kTruncated);
  const unsigned char* header = at();
  uint64_t length = load_u64(header);
  if (options_.verify_crc && crc32c::unmask(load_u32(header + 8)) != crc32c::value(header, 8))
    return fail(Status::kBadLengthCrc);
  chunk_begin_ += kHeader;
  int64_t size = stream_->size();
  uint64_t body_start = record_offset_ + kHeader;
  if (size >= 0) {
    uint64_t left =
        static_cast<uint64_t>(size) > body_start ? static_cast<uint64_t>(size) - body_start : 0;
    if (length > left || left - length < kFooter) return fail(Status::kTruncated);
  } else if (length > options_.max_record_bytes)
    return fail(Status::kBadLengthCrc);
  std::shared_ptr<Buffer> buf;
  uint32_t crc = 0;
  if (length + kFooter <= kChunkBytes / 2) {
    // The usual case: the record and its CRC made contiguous in the chunk, then viewed.
    if (ensure(length + kFooter) < length + kFooter) return fail(Status::kTruncated);
    buf = view(static_cast<size_t>(length));
    if (options_.verify_crc) crc = crc32c::value(at(), length);
    chunk_begin_ += length;
  } else {
    // A large body: what the chunk holds of it is copied (CRC in the same pass), the
    // rest read straight from the stream into its own buffer.
    buf = Buffer::allocate(static_cast<size_t>(length));
    auto* body = reinterpret_cast<unsigned char*>(buf->mutable_data());
    size_t head = std::min<size_t>(chunk_end_ - chunk_begin_, length);
    if (options_.verify_crc) {
      crc = crc32c::extend_copy(0, body, at(), head);
    } else {
      std::memcpy(body, at(), head);
    }
    chunk_begin_ += head;
    size_t rest = static_cast<size_t>(length) - head;
    if (stream_->read_fully(body + head, rest) < rest) return fail(Status::kTruncated);
    if (options_.verify_crc) crc = crc32c::extend(crc, body + head, rest);
    if (ensure(kFooter) < kFooter) return fail(Status::kTruncated);
  }
  uint32_t stored = load_u32(at());
  chunk_begin_ += kFooter;
  offset_ = body_start + length + kFooter;
  if (options_.verify_crc && crc32c::unmask(stored) != crc) return Status::kBadDataCrc;
  *record = std::move(buf);
  return Status::kOk;
}

}  // namespace dataecho
