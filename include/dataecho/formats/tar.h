// WebDataset tar shards: consecutive entries sharing a key (the path up to the first
// dot of the file name) form one sample, each extension one field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dataecho/core/dataset.h"
#include "dataecho/formats/on_error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

// ---------------------------------------------------------------------------------
// TarReader: the samples of one tar stream (plain or compressed: libarchive sniffs gzip,
// bzip2, xz, zstd), streamed from a ByteStream through archive_read_open callbacks,
// never unpacked to disk. Buffers one sample (its entries' bytes) plus a 256 KiB read
// chunk. Errors are returned as a status; exceptions of the stream are rethrown.
// Not thread-safe.
struct TarSample {
  std::string key;      // "shard0/sample000123"
  uint64_t offset = 0;  // byte offset of its first entry's header (uncompressed archives)
  std::vector<std::pair<std::string, std::shared_ptr<Buffer>>> entries;  // extension -> bytes
};

class TarReader {
 public:
  enum class Status {
    kOk,
    kEnd,
    kBadSample,  // this sample is unusable (duplicate entry, entry without extension, a link);
                 // reading goes on
    kCorrupt,    // unreadable from corrupt_offset() on (a sample cut by it included): the rest is
                 // lost
  };
  explicit TarReader(std::unique_ptr<ByteStream> stream);
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  Status next(TarSample* sample);
  const std::string& error() const { return error_; }  // the reason after kBadSample/kCorrupt
  // Where the next sample starts, for seek_to(); -1 when it cannot be sought (compressed).
  int64_t resume_offset() const;
  // Starts reading at a header offset returned by resume_offset() earlier.
  void seek_to(uint64_t offset);
  // Bytes of the stream from `offset` to its end (what a kCorrupt loses).
  uint64_t bytes_from(uint64_t offset);
  uint64_t stream_position() const { return stream_->position(); }

  // Byte offset (uncompressed archive) where the corruption was found, after kCorrupt.
  uint64_t corrupt_offset() const { return corrupt_offset_; }
  bool compressed() const { return compressed_; }
  // The compression libarchive found ("gzip", "bzip2", "xz", "zstd"); "" for a plain archive.
  const std::string& compression() const { return compression_; }

  // libarchive's read callback (public for the C trampoline only).
  long on_read(const void** buffer);

 private:
  void open();
  bool fail(const char* what, uint64_t offset);
  static uint64_t data_size(const std::shared_ptr<Buffer>& b) { return b ? b->size() : 0; }
  bool
  read_entry();  // the next entry (not a directory) into pending_; false at the end or on error
  void set_pending(const std::string& name, uint64_t header, std::shared_ptr<Buffer> data);
  std::unique_ptr<ByteStream> stream_;
  struct archive* archive_ = nullptr;
  std::vector<char> chunk_;
  uint64_t base_ = 0;  // stream offset where the archive reading started
  std::exception_ptr stream_error_;
  std::string error_;
  std::string compression_;
  bool at_end_ = false, corrupt_ = false, corrupt_reported_ = false, compressed_ = false;
  uint64_t next_offset_ = 0, corrupt_offset_ = 0;
  bool have_pending_ = false;
  std::string pending_key_, pending_ext_;
  // Why the pending entry cannot be read (a link): its sample is then a bad sample.
  std::string pending_bad_;
  uint64_t pending_offset_ = 0;
  std::shared_ptr<Buffer> pending_data_;
};

// ---------------------------------------------------------------------------------
// The `tar` source: each file one shard; one Example per sample, id (shard << 40) |
// sample index. Fields: the extensions ("jpg", "seg.png"), bytes as uint8 [n];
// `.cls` and `.label` hold a decimal integer and become an int64 scalar. With `fields`
// only those are kept, each required. Errors travel by `on_error` (see on_error.h): a
// sample without a required field, a duplicate entry or a bad label costs that sample;
// a corrupt archive ends the file (its remaining bytes are counted in "bytes_lost").
// Buffers one sample. Save/restore: shard, sample index and the byte offset of the
// next sample's first header (compressed shards are re-read up to the sample instead).
// Record index (Dataset::record_index): each sample's first header, found by a read of the
// shard; a compressed shard has none, and a record range of one starts at sample 0 only.
// Thread-safety: the dataset is immutable; one consumer per iterator.
struct TarOptions {
  std::vector<std::string> uris;
  // field name -> extension to keep (each required); empty = every extension, named by it.
  std::vector<std::pair<std::string, std::string>> fields;
  OnError on_error = OnError::kFail;
  StreamOptions stream;
};

DatasetPtr make_tar_source(const TarOptions& options);

}  // namespace dataecho
