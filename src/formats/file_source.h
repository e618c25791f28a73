// What the multi-file sources (tfrecord, tar, text) share: one dataset per file, in the
// given order, under a source node with shards() (so that `interleave` and file-level
// `shard` can split it), the checks on the file list, and one iterator skeleton. Each
// file's dataset numbers its records; file_record_id (formats/tfrecord.h) makes the
// stable ids (file << 40) | record, hence at most 2^23 files.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bad_records.h"
#include "dataecho/core/error.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"
#include "record_index.h"

namespace dataecho {

// One file of such a source: its options (shared by all files), its index and its uri,
// and for a record range (Dataset::record_range) the records [begin, end) and the byte
// offset of record `begin`; the whole file by default (end -1: to its end).
template <class Options>
class FileDatasetBase : public Dataset {
 public:
  FileDatasetBase(std::shared_ptr<const Options> o, int64_t shard, std::string uri,
                  RecordRange range = {0, 0, -1, 0})
      : o_(std::move(o)), shard_(shard), uri_(std::move(uri)), range_(range) {}

  const Options& options() const { return *o_; }
  const std::shared_ptr<const Options>& shared_options() const { return o_; }
  int64_t shard() const { return shard_; }  // the file's index: the high bits of its ids
  const std::string& uri() const { return uri_; }
  // The source's stream options, counting into the node's stats (http, io_bytes).
  StreamOptions stream_options() const {
    StreamOptions so = o_->stream;
    so.stats = this->node_stats();
    return so;
  }
  int64_t range_begin() const { return range_.begin; }
  int64_t range_end() const { return range_.end; }  // -1: the end of the file
  uint64_t range_offset() const { return range_.offset; }

  // The head of a file iterator's state: its tag (the op's name) and the file's index,
  // checked on restore ("saved state is of another shard", naming the file).
  void save_head(StateWriter& w) const {
    w.begin(op_name());
    w.write_i64(shard_);
  }
  void restore_head(StateReader& r, const std::string& label) const {
    r.expect(op_name());
    if (r.read_i64() != shard_)
      throw_error(ErrorCode::kInvalidArgument, label, "saved state is of another shard", uri_);
  }

 private:
  std::shared_ptr<const Options> o_;
  int64_t shard_;
  std::string uri_;
  RecordRange range_;
};

// The iterator over one file, as every file source reads it: open the file at the
// saved position when there is no reader, read one record at a time until the end, and
// hand bad records to the on_error policy (BadRecords). Its state is the head, the
// source's position, whether the file is done, and the policy's state; restore() drops
// the reader, so that the next next() reopens the file at the restored position.
// A record range starts at its first record's offset and ends after its last record (the
// range is the dataset's, not part of the state).
// A source gives its op's name (kOp), its position and how to open and read, and, for its
// record index, static index(ds) and not_seekable(ds).
template <class Options, class Reader>
class FileIterator : public Iterator {
 public:
  explicit FileIterator(const FileDatasetBase<Options>* ds)
      : ds_(ds), bad_(ds->op_name(), ds->uri(), ds->options().on_error) {}

  void save(StateWriter& w) final {
    ds_->save_head(w);
    save_position(w);
    w.write_bool(done_);
    bad_.save(w);
  }
  void restore(StateReader& r) final {
    ds_->restore_head(r, label());
    restore_position(r);
    done_ = r.read_bool();
    bad_.restore(r);
    reader_.reset();  // reopened (and sought) by the next next()
  }

 protected:
  std::optional<Example> next_impl() final {
    while (!done_) {
      if (ds_->range_end() >= 0 && next_record() >= ds_->range_end()) {
        finish();
        break;
      }
      if (!reader_) open();
      if (std::optional<Example> e = read_one()) return e;
    }
    return std::nullopt;
  }

  // Sets reader_ to the file, at the position the iterator is at.
  virtual void open() = 0;
  // The next element: a record, or what the on_error policy puts in a bad one's place;
  // nullopt to read on (a record skipped), or at the end of the file after finish().
  virtual std::optional<Example> read_one() = 0;
  virtual void save_position(StateWriter& w) const = 0;
  virtual void restore_position(StateReader& r) = 0;
  // The number of the next record to read (records before it counted, bad ones included).
  virtual int64_t next_record() const = 0;

  // The file is done: no more reads, and the policy's summary line.
  void finish() {
    done_ = true;
    reader_.reset();
    bad_.finish();
  }
  // The file ended where a record would start. A record range that is not at its end
  // then reads a file shorter than the one indexed.
  void end_of_file() {
    const int64_t end = ds_->range_end();
    if (end >= 0 && next_record() < end) {
      throw_error(ErrorCode::kDataLoss, label(),
                  "the file has " + std::to_string(next_record()) +
                      " records, so it ends inside the record range [" +
                      std::to_string(ds_->range_begin()) + ", " + std::to_string(end) +
                      "): it changed since it was indexed",
                  ds_->uri());
    }
    finish();
  }
  // A compressed file cannot start at a record in its middle (`filter`: "gzip").
  [[noreturn]] void cannot_start(const std::string& filter) const {
    throw_error(ErrorCode::kInvalidArgument, label(),
                "cannot start at record " + std::to_string(next_record()) + ": " + filter +
                    " has no index; decompress the file to read a range of its records",
                ds_->uri());
  }

  const Options& options() const { return ds_->options(); }

  const FileDatasetBase<Options>* ds_;
  BadRecords bad_;
  std::unique_ptr<Reader> reader_;
  bool done_ = false;
};

// A file of the source whose iterator is `It` (a FileIterator with its op's name kOp).
template <class Options, class It>
class FileDataset final : public FileDatasetBase<Options> {
 public:
  using FileDatasetBase<Options>::FileDatasetBase;
  std::string op_name() const override { return It::kOp; }
  std::string not_seekable_reason() const override { return It::not_seekable(*this); }
  std::vector<ShardIndex> record_index() const override { return {It::index(*this)}; }
  // A range of this file (the source checked the shard number); its records past the
  // end of the file are found missing when it gets there.
  DatasetPtr record_range(const RecordRange& r) const override {
    check_record_range(this->label(), r, -1, -1, this->uri());
    if (r.begin > 0 && r.offset == 0)
      throw_error(ErrorCode::kInvalidArgument, this->label(),
                  "record " + std::to_string(r.begin) +
                      " cannot start at byte 0 (only record 0 does): give its offset from the "
                      "record index",
                  this->uri());
    auto d = std::make_shared<FileDataset>(this->shared_options(), this->shard(), this->uri(), r);
    if (this->node_stats()) d->attach(this->label(), this->node_stats());
    return d;
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(this);
  }
};

// The source of `o.uris`, one FileDataset<Options, It> per file.
template <class It, class Options>
DatasetPtr make_file_source(const Options& o) {
  const std::string kind = It::kOp;
  if (o.uris.empty()) throw_error(ErrorCode::kInvalidArgument, kind, "no files given");
  if (o.uris.size() >= (size_t{1} << (63 - kShardIdShift))) {
    throw_error(ErrorCode::kInvalidArgument, kind,
                std::to_string(o.uris.size()) + " files: too many for stable ids (at most " +
                    std::to_string((size_t{1} << (63 - kShardIdShift)) - 1) + ")");
  }
  auto shared = std::make_shared<const Options>(o);
  std::vector<std::shared_ptr<Dataset>> files;
  files.reserve(o.uris.size());
  for (size_t i = 0; i < o.uris.size(); ++i)
    files.push_back(
        std::make_shared<FileDataset<Options, It>>(shared, static_cast<int64_t>(i), o.uris[i]));
  return make_sharded_source(kind, std::move(files));
}

}  // namespace dataecho
