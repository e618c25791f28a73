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

#include "dataecho/core/example.h"
#include "dataecho/dataset.h"
#include "dataecho/formats/on_error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

// ---------------------------------------------------------------------------------
// TfRecordReader: the records of one stream, front to back, both CRCs verified.
// Reads the stream in chunks of kChunkBytes (1 MiB: few system calls) and copies each
// record into a fresh Buffer that the caller keeps, computing the data CRC in the same
// pass as the copy; a record body larger than half a chunk is read straight into its
// Buffer. Buffers: one chunk. Errors are returned as a status so that a source can
// apply its on_error policy; I/O failures of the stream throw. Not thread-safe.
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

  // Reads the next record into *record (a uint8 buffer of exactly its length).
  Status next(std::shared_ptr<Buffer>* record);
  // After a status other than kOk/kBadDataCrc the reader stays at the end: next() gives kEnd.

  uint64_t offset() const { return offset_; }                // byte offset of the next record
  uint64_t record_offset() const { return record_offset_; }  // offset of the record last read
  // Bytes from record_offset() to the end of the stream (after kBadLengthCrc/kTruncated:
  // what was lost); reads the rest of the stream when its size is unknown.
  uint64_t bytes_after_record_start();
  // Continues at a record boundary found by offset() earlier.
  void seek(uint64_t offset);

  static constexpr size_t kChunkBytes = 1 << 20;

 private:
  // Copies the next n bytes of the stream to dst (extending *crc over them when crc is
  // not null); returns how many there were (fewer only at the end of the stream).
  size_t take(unsigned char* dst, size_t n, uint32_t* crc);

  std::unique_ptr<ByteStream> stream_;
  Options options_;
  std::unique_ptr<unsigned char[]> chunk_;  // allocated on first use
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
// otherwise); float_list -> float32 likewise. `features` empty: every feature, field
// name = key, in key order. Throws dataecho::Error(kDataLoss, "tf.Example") with the
// reason ("invalid tf.Example: ...", "missing feature 'image/encoded'").
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
// Thread-safety: the dataset is immutable; one consumer per iterator.
struct TfRecordOptions {
  std::vector<std::string> uris;    // expanded already (see expand_uris)
  std::vector<TfFeature> features;  // empty = all features, named by their keys
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
