// The `tar` source (see dataecho/formats/tar.h for its contract).
#include <charconv>

#include "dataecho/formats/tar.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"
#include "file_source.h"

namespace dataecho {
namespace {

bool is_label_ext(const std::string& ext) { return ext == "cls" || ext == "label"; }

// A text integer ("3", " 7\n") as an int64 scalar; nullopt if it is not one.
std::optional<Tensor> parse_label(const Buffer& b) {
  const char* p = reinterpret_cast<const char*>(b.data());
  const char* end = p + b.size();
  while (p < end && std::isspace(static_cast<unsigned char>(*p))) ++p;
  while (end > p && std::isspace(static_cast<unsigned char>(end[-1]))) --end;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(p, end, v);
  if (p == end || ec != std::errc() || ptr != end) return std::nullopt;
  return Tensor::scalar<int64_t>(v);
}

class TarIterator final : public FileIterator<TarOptions, TarReader> {
 public:
  static constexpr const char* kOp = "tar";
  using Base = FileDatasetBase<TarOptions>;
  explicit TarIterator(const Base* ds)
      : FileIterator(ds),
        index_(ds->range_begin()),
        resume_(static_cast<int64_t>(ds->range_offset())) {}

  static std::string not_seekable(const Base& ds) {
    TarReader reader(open_stream(ds.uri(), ds.stream_options()));
    return reader.compressed() ? compressed_reason("tar shard", ds.uri(), reader.compression())
                               : "";
  }
  static ShardIndex index(const Base& ds) {
    return cached_record_index(
        ds.uri(), kOp, [&] { return tar_record_index(ds.label(), ds.uri(), ds.stream_options()); });
  }

 private:
  int64_t next_record() const override { return index_; }
  void save_position(StateWriter& w) const override {
    w.write_i64(index_);
    w.write_i64(resume_);
  }
  void restore_position(StateReader& r) override {
    index_ = r.read_i64();
    resume_ = r.read_i64();
  }

  std::optional<Example> read_one() override {
    TarSample s;
    auto st = reader_->next(&s);
    int64_t idx = index_;
    switch (st) {
      case TarReader::Status::kEnd:
        end_of_file();
        return std::nullopt;
      case TarReader::Status::kCorrupt: {
        uint64_t at = reader_->corrupt_offset();
        uint64_t lost = reader_->bytes_from(at);
        auto rep = bad_.bad(stats(), label(), reader_->error(), idx, at, lost);
        finish();
        return rep;
      }
      case TarReader::Status::kBadSample:
        ++index_;
        resume_ = reader_->resume_offset();
        return bad_.bad(stats(), label(), reader_->error(), idx, s.offset);
      case TarReader::Status::kOk: {
        ++index_;
        resume_ = reader_->resume_offset();
        std::string why;
        Example e(file_record_id(ds_->shard(), idx));
        if (make_example(s, e, &why)) {
          bad_.good(e);
          return e;
        }
        return bad_.bad(stats(), label(), why, idx, s.offset);
      }
    }
    return std::nullopt;
  }

  void open() override {
    StreamOptions so = options().stream;
    so.stats = ds_->node_stats();  // http and cache_dir counters on the source's node
    reader_ = std::make_unique<TarReader>(open_stream(ds_->uri(), so));
    if (index_ == 0) return;
    if (resume_ >= 0) {
      // A plain shard's offset (a compressed one's start of a record range has none).
      if (reader_->compressed()) cannot_start(reader_->compression());
      reader_->seek_to(static_cast<uint64_t>(resume_));
      return;
    }
    // A compressed shard cannot be sought: read up to the saved sample again.
    TarSample s;
    for (int64_t i = 0; i < index_; ++i) {
      auto st = reader_->next(&s);
      if (st == TarReader::Status::kEnd || st == TarReader::Status::kCorrupt) {
        throw_error(ErrorCode::kDataLoss, label(), "the shard changed since the state was saved",
                    ds_->uri());
      }
    }
  }

  bool make_example(TarSample& s, Example& e, std::string* why) const {
    auto tensor_of = [&](const std::string& ext,
                         const std::shared_ptr<Buffer>& b) -> std::optional<Tensor> {
      if (is_label_ext(ext)) {
        auto t = parse_label(*b);
        if (!t) *why = "'" + s.key + "." + ext + "' is not a decimal integer";
        return t;
      }
      return Tensor(DType::kUInt8, {static_cast<int64_t>(b->size())}, b);
    };
    const auto& fields = options().fields;
    if (fields.empty()) {
      for (const auto& [ext, b] : s.entries) {
        auto t = tensor_of(ext, b);
        if (!t) return false;
        e.set(ext, std::move(*t));
      }
      return true;
    }
    for (const auto& [name, ext] : fields) {
      const std::shared_ptr<Buffer>* found = nullptr;
      for (const auto& [x, b] : s.entries) {
        if (x == ext) found = &b;
      }
      if (!found) {
        std::string has;
        for (const auto& [x, b] : s.entries) has += (has.empty() ? "." : ", .") + x;
        *why = "tar entry without its fields: sample '" + s.key + "' has no ." + ext + " (it has " +
               has + ")";
        return false;
      }
      auto t = tensor_of(ext, *found);
      if (!t) return false;
      e.set(name, std::move(*t));
    }
    return true;
  }

  int64_t index_;
  int64_t resume_;
};

}  // namespace

DatasetPtr make_tar_source(const TarOptions& o) { return make_file_source<TarIterator>(o); }

}  // namespace dataecho
