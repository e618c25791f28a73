// TFRecord files: the framing TensorFlow writes, records holding serialized
// tf.train.Example messages, a reader, a writer and the `tfrecord` source.
//
// Framing of each record (little-endian):
//   uint64 length | uint32 masked CRC32C(length) | length bytes data | uint32 masked CRC32C(data)
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataecho/core/dataset.h"
#include "dataecho/core/example.h"
#include "dataecho/formats/on_error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

// ---------------------------------------------------------------------------------
// TfRecordReader: the records of one stream, front to back, both CRCs verified.
// Reads the stream into chunks of kChunkBytes (512 KiB), kReadBytes per read(). A record
// of up to half a chunk is handed out without a copy: its Buffer is a view of the chunk
// it lies in (footprint() = the chunk). A record cut by the end of a chunk has its first
// part moved to the front of the next chunk (less than half a chunk per chunk). A larger
// record body is read straight into a Buffer of its own.
// Memory: the current chunk, plus each chunk that a record the caller still holds views,
// plus up to kSpareChunks recycled chunks shared by all readers in the process. A chunk
// that no record views any more is read into again in place; one still viewed is left
// to its records and comes back for reuse when the last is dropped, in any thread.
// Operators that hold elements for long copy such records out (Example::compact).
// Why views: copying each record out of the chunk cost as much as the CRC; with views
// and the faster CRC the reader went from 69-77% to 72-79% of plain read() (medians of
// four alternating sets, docs/formats.md).
// Errors are returned as a status so that a source can apply its on_error policy; I/O
// failures of the stream throw. Not thread-safe (one reader per stream).
class TfRecordReader {
 public:
  enum class Status {
    kOk,
    kEnd,           // clean end of the data
    kBadDataCrc,    // the record's data does not match its CRC; the reader is past it
    kBadLengthCrc,  // the length field is corrupt: the rest of the stream cannot be framed
    kTruncated,     // the data ends inside a record header, body or CRC
  };
  static const char* status_reason(Status s);  // "bad data CRC", ...

  struct Options {
    bool verify_crc = true;
    // A length above this is treated as corrupt framing when the stream's size is
    // unknown (with a known size, a length running past the end is kTruncated).
    uint64_t max_record_bytes = uint64_t{1} << 32;
  };

  explicit TfRecordReader(std::unique_ptr<ByteStream> stream, Options options);
  explicit TfRecordReader(std::unique_ptr<ByteStream> stream);
  ~TfRecordReader();
  TfRecordReader(const TfRecordReader&) = delete;
  TfRecordReader& operator=(const TfRecordReader&) = delete;

  // Reads the next record into *record (a uint8 buffer of exactly its length). What
  // *record held is released first, whatever the status: a loop that reads every record
  // into one variable then lets the reader read on into the chunk the last record
  // viewed, still in cache, instead of a fresh one.
  Status next(std::shared_ptr<Buffer>* record);
  // After a status other than kOk/kBadDataCrc the reader stays at the end: next() gives kEnd.

  uint64_t offset() const { return offset_; }                // byte offset of the next record
  uint64_t record_offset() const { return record_offset_; }  // offset of the record last read
  // Bytes from record_offset() to the end of the stream (after kBadLengthCrc/kTruncated:
  // what was lost); reads the rest of the stream when its size is unknown.
  uint64_t bytes_after_record_start();
  // Continues at a record boundary found by offset() earlier.
  void seek(uint64_t offset);

  // 512 KiB: the chunk a held record pins and the one being read fit in L2 together
  // (measured, read + CRC of a file alternating two buffers: 87-88% of plain 1 MiB
  // reads with 512 KiB buffers, 82-83% with 1 MiB ones).
  static constexpr size_t kChunkBytes = 512 << 10;
  // The chunk is filled 256 KiB per read(), as records need the bytes: the CRC then reads
  // them from L2 (measured: read + CRC of a file in 256 KiB pieces 88-93% of plain 1 MiB
  // reads, in 1 MiB pieces 80-87%).
  static constexpr size_t kReadBytes = 256 << 10;
  static constexpr size_t kSpareChunks = 4;  // recycled chunks kept, for all readers

 private:
  struct Chunk;
  class ChunkPool;
  // Makes the next n (<= kChunkBytes / 2) bytes of the stream contiguous in the chunk
  // from chunk_begin_, reading more; returns how many bytes the chunk then holds from
  // there (fewer than n only at the end of the stream).
  size_t ensure(size_t n);
  unsigned char* at() const;
  std::shared_ptr<Buffer> view(size_t nbytes);  // the next nbytes of the chunk
  // The framing is lost: the reader stays at the end (next() gives kEnd) after `s`.
  Status fail(Status s) {
    dead_ = true;
    return s;
  }

  std::unique_ptr<ByteStream> stream_;
  Options options_;
  Chunk* chunk_ = nullptr;  // the reader's reference to the current chunk; null at first
  size_t chunk_begin_ = 0, chunk_end_ = 0;
  uint64_t offset_ = 0;
  uint64_t record_offset_ = 0;
  bool dead_ = false;
};

// ---------------------------------------------------------------------------------
// TfRecordWriter: writes records with TensorFlow's framing to a local file (opened by
// the constructor, truncating it). Buffers up to 1 MiB before writing. Errors: a
// dataecho::Error (stage "tfrecord") naming the path. Not thread-safe.
class TfRecordWriter {
 public:
  explicit TfRecordWriter(const std::string& path);
  ~TfRecordWriter();  // closes; errors at this point are printed, not thrown
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void write(std::string_view record);
  void close();  // flushes and closes; throws on failure
  int64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t records_ = 0;
  uint64_t bytes_ = 0;
};

// ---------------------------------------------------------------------------------
// tf.train.Example <-> Example fields.

// A feature to keep: tf.Example key -> field name.
struct TfFeature {
  std::string field;
  std::string key;
};

// Parses a serialized tf.train.Example and adds its features to `out`: bytes_list
// with one value -> uint8 [n]; int64_list -> int64 (scalar for one value, [n]
// otherwise); float_list -> float32 likewise. `features` empty: every feature, in key
// order, named by its key, except the standard image keys: "image/encoded" is named
// "image" and "image/class/label" "label" (the names decode_image, augment and the
// trainer read by default), unless the record has a feature of that name. Throws
// dataecho::Error(kDataLoss, "tf.Example") with the reason ("invalid tf.Example: ...", "missing
// feature 'image/encoded'").
void parse_tf_example(const void* data, size_t size, const std::vector<TfFeature>& features,
                      Example& out);

// The tf.train.Example of an Example's fields: uint8 tensors -> bytes_list (one value,
// the raw bytes), int32/int64 -> int64_list, float32/float64 -> float_list. Shapes are
// not stored (scalars and vectors read back as they were; others read back flat).
std::string serialize_tf_example(const Example& example);

// ---------------------------------------------------------------------------------
// The `tfrecord` source: each file one shard (shards()), read one after another.
// Ids: (shard index << 40) | record index, stable for the same file list.
// Buffers: one record at a time plus the stream's read-ahead (StreamOptions).
// Errors travel by `on_error` (see on_error.h); with kFail a dataecho::Error names the
// node, the reason, the file, the record index and its byte offset. Nothing valid
// after a bad record is lost: a bad data CRC, an invalid tf.Example or a missing
// feature costs exactly that record; a corrupt length or a truncated record ends the
// file (the bytes from that record on are counted in counter "bytes_lost").
// Save/restore: shard index, byte offset and record index (the file is seeked).
// Record index (Dataset::record_index): the sidecar {uri}.idx when there is one (DALI's
// "offset size" lines, checked against the file's size), else a walk over the record
// headers; a record range opens the file at its first record (docs/formats.md).
// Thread-safety: the dataset is immutable; one consumer per iterator.
struct TfRecordOptions {
  std::vector<std::string> uris;    // expanded already (see expand_uris)
  std::vector<TfFeature> features;  // empty = all (see parse_tf_example for the names)
  bool raw = false;                 // field "record" = the record's bytes, not parsed
  OnError on_error = OnError::kFail;
  bool verify_crc = true;
  StreamOptions stream;
};

DatasetPtr make_tfrecord_source(const TfRecordOptions& options);

constexpr int kShardIdShift = 40;  // id = (shard << 40) | record
inline int64_t file_record_id(int64_t shard, int64_t record) {
  return (shard << kShardIdShift) | record;
}

}  // namespace dataecho
