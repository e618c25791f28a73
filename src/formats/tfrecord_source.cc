// The `tfrecord` source (see dataecho/formats/tfrecord.h for its contract).
#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"
#include "file_source.h"

namespace dataecho {
namespace {

// One file: one shard.
class TfRecordIterator final : public FileIterator<TfRecordOptions, TfRecordReader> {
 public:
  static constexpr const char* kOp = "tfrecord";
  using Base = FileDatasetBase<TfRecordOptions>;
  explicit TfRecordIterator(const Base* ds)
      : FileIterator(ds), offset_(ds->range_offset()), record_(ds->range_begin()) {}

  static std::string not_seekable(const Base&) { return ""; }
  static ShardIndex index(const Base& ds) {
    return cached_record_index(ds.uri(), kOp, [&] {
      return tfrecord_record_index(ds.label(), ds.uri(), ds.stream_options());
    });
  }

 private:
  int64_t next_record() const override { return record_; }
  void save_position(StateWriter& w) const override {
    w.write_u64(offset_);
    w.write_i64(record_);
  }
  void restore_position(StateReader& r) override {
    offset_ = r.read_u64();
    record_ = r.read_i64();
  }

  void open() override {
    TfRecordReader::Options ro;
    ro.verify_crc = options().verify_crc;
    StreamOptions so = options().stream;
    so.stats = ds_->node_stats();  // http and cache_dir counters on the source's node
    reader_ = std::make_unique<TfRecordReader>(open_stream(ds_->uri(), so), ro);
    if (offset_ > 0) reader_->seek(offset_);
  }

  std::optional<Example> read_one() override {
    const TfRecordOptions& o = options();
    std::shared_ptr<Buffer> rec;
    auto status = reader_->next(&rec);
    int64_t index = record_;
    uint64_t at = reader_->record_offset();
    switch (status) {
      case TfRecordReader::Status::kEnd:
        end_of_file();
        return std::nullopt;
      case TfRecordReader::Status::kOk: {
        ++record_;
        offset_ = reader_->offset();
        Example e(file_record_id(ds_->shard(), index));
        if (o.raw) {
          e.set("record", Tensor(DType::kUInt8, {static_cast<int64_t>(rec->size())}, rec));
        } else {
          try {
            parse_tf_example(rec->data(), rec->size(), o.features, e);
          } catch (const Error& err) {
            return bad_.bad(stats(), label(), err.message(), index, at);
          }
        }
        bad_.good(e);
        return e;
      }
      case TfRecordReader::Status::kBadDataCrc:
        ++record_;
        offset_ = reader_->offset();
        return bad_.bad(stats(), label(), TfRecordReader::status_reason(status), index, at);
      case TfRecordReader::Status::kBadLengthCrc:
      case TfRecordReader::Status::kTruncated: {
        uint64_t lost = reader_->bytes_after_record_start();
        auto rep =
            bad_.bad(stats(), label(), TfRecordReader::status_reason(status), index, at, lost);
        finish();
        return rep;
      }
    }
    return std::nullopt;
  }

  uint64_t offset_;
  int64_t record_;
};

}  // namespace

DatasetPtr make_tfrecord_source(const TfRecordOptions& o) {
  if (o.raw && !o.features.empty()) {
    throw_error(ErrorCode::kInvalidArgument, "tfrecord",
                "\"raw\" gives the record bytes; it takes no \"features\"");
  }
  return make_file_source<TfRecordIterator>(o);
}

}  // namespace dataecho
