// The `tfrecord` source (see dataecho/formats/tfrecord.h for its contract).
#include "bad_records.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"
#include "file_source.h"

namespace dataecho {
namespace {

// One file: one shard.
class TfRecordFileDataset : public FileDatasetBase<TfRecordOptions> {
 public:
  using FileDatasetBase::FileDatasetBase;
  std::string op_name() const override { return "tfrecord"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(this);
  }

 private:
  class It : public Iterator {
   public:
    explicit It(const TfRecordFileDataset* ds)
        : ds_(ds), bad_("tfrecord", ds->uri_, ds->o_->on_error) {}

    void save(StateWriter& w) override {
      ds_->save_head(w);
      w.write_u64(offset_);
      w.write_i64(record_);
      w.write_bool(done_);
      bad_.save(w);
    }
    void restore(StateReader& r) override {
      ds_->restore_head(r, label());
      offset_ = r.read_u64();
      record_ = r.read_i64();
      done_ = r.read_bool();
      bad_.restore(r);
      reader_.reset();  // reopened (and seeked) by the next next()
    }

   protected:
    std::optional<Example> next_impl() override {
      const TfRecordOptions& o = *ds_->o_;
      while (!done_) {
        if (!reader_) {
          TfRecordReader::Options ro;
          ro.verify_crc = o.verify_crc;
          StreamOptions so = o.stream;
          so.stats = ds_->node_stats();  // http and cache_dir counters on the source's node
          reader_ = std::make_unique<TfRecordReader>(open_stream(ds_->uri_, so), ro);
          if (offset_ > 0) reader_->seek(offset_);
        }
        std::shared_ptr<Buffer> rec;
        auto status = reader_->next(&rec);
        int64_t index = record_;
        uint64_t at = reader_->record_offset();
        switch (status) {
          case TfRecordReader::Status::kEnd:
            finish();
            return std::nullopt;
          case TfRecordReader::Status::kOk: {
            ++record_;
            offset_ = reader_->offset();
            Example e(file_record_id(ds_->shard_, index));
            if (o.raw) {
              e.set("record", Tensor(DType::kUInt8, {static_cast<int64_t>(rec->size())}, rec));
            } else {
              try {
                parse_tf_example(rec->data(), rec->size(), o.features, e);
              } catch (const Error& err) {
                if (auto rep = bad_.bad(stats(), label(), err.message(), index, at)) return rep;
                continue;
              }
            }
            bad_.good(e);
            return e;
          }
          case TfRecordReader::Status::kBadDataCrc:
            ++record_;
            offset_ = reader_->offset();
            if (auto rep =
                    bad_.bad(stats(), label(), TfRecordReader::status_reason(status), index, at))
              return rep;
            continue;
          case TfRecordReader::Status::kBadLengthCrc:
          case TfRecordReader::Status::kTruncated: {
            uint64_t lost = reader_->bytes_after_record_start();
            auto rep =
                bad_.bad(stats(), label(), TfRecordReader::status_reason(status), index, at, lost);
            finish();
            if (rep) return rep;
            return std::nullopt;
          }
        }
      }
      return std::nullopt;
    }

   private:
    void finish() {
      done_ = true;
      reader_.reset();
      bad_.finish();
    }

    const TfRecordFileDataset* ds_;
    BadRecords bad_;
    std::unique_ptr<TfRecordReader> reader_;
    uint64_t offset_ = 0;
    int64_t record_ = 0;
    bool done_ = false;
  };
};

}  // namespace

DatasetPtr make_tfrecord_source(const TfRecordOptions& o) {
  if (o.raw && !o.features.empty()) {
    throw_error(ErrorCode::kInvalidArgument, "tfrecord",
                "\"raw\" gives the record bytes; it takes no \"features\"");
  }
  return make_file_source<TfRecordFileDataset>("tfrecord", o);
}

}  // namespace dataecho
