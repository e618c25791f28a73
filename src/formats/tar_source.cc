// The `tar` source (see dataecho/formats/tar.h for its contract).
#include <charconv>

#include "bad_records.h"
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

class TarFileDataset : public FileDatasetBase<TarOptions> {
 public:
  using FileDatasetBase::FileDatasetBase;
  std::string op_name() const override { return "tar"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(this);
  }

 private:
  class It : public Iterator {
   public:
    explicit It(const TarFileDataset* ds) : ds_(ds), bad_("tar", ds->uri_, ds->o_->on_error) {}

    void save(StateWriter& w) override {
      ds_->save_head(w);
      w.write_i64(index_);
      w.write_i64(resume_);
      w.write_bool(done_);
      bad_.save(w);
    }
    void restore(StateReader& r) override {
      ds_->restore_head(r, label());
      index_ = r.read_i64();
      resume_ = r.read_i64();
      done_ = r.read_bool();
      bad_.restore(r);
      reader_.reset();
    }

   protected:
    std::optional<Example> next_impl() override {
      while (!done_) {
        if (!reader_) open();
        TarSample s;
        auto st = reader_->next(&s);
        int64_t idx = index_;
        switch (st) {
          case TarReader::Status::kEnd:
            finish();
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
            if (auto rep = bad_.bad(stats(), label(), reader_->error(), idx, s.offset)) return rep;
            continue;
          case TarReader::Status::kOk: {
            ++index_;
            resume_ = reader_->resume_offset();
            std::string why;
            Example e(file_record_id(ds_->shard_, idx));
            if (make_example(s, e, &why)) {
              bad_.good(e);
              return e;
            }
            if (auto rep = bad_.bad(stats(), label(), why, idx, s.offset)) return rep;
            continue;
          }
        }
      }
      return std::nullopt;
    }

   private:
    void open() {
      StreamOptions so = ds_->o_->stream;
      so.stats = ds_->node_stats();  // http and cache_dir counters on the source's node
      reader_ = std::make_unique<TarReader>(open_stream(ds_->uri_, so));
      if (index_ == 0) return;
      if (resume_ >= 0) {
        reader_->seek_to(static_cast<uint64_t>(resume_));
        return;
      }
      // A compressed shard cannot be sought: read up to the saved sample again.
      TarSample s;
      for (int64_t i = 0; i < index_; ++i) {
        auto st = reader_->next(&s);
        if (st == TarReader::Status::kEnd || st == TarReader::Status::kCorrupt) {
          throw_error(ErrorCode::kDataLoss, label(), "the shard changed since the state was saved",
                      ds_->uri_);
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
      const auto& fields = ds_->o_->fields;
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
          *why = "tar entry without its fields: sample '" + s.key + "' has no ." + ext +
                 " (it has " + has + ")";
          return false;
        }
        auto t = tensor_of(ext, *found);
        if (!t) return false;
        e.set(name, std::move(*t));
      }
      return true;
    }

    void finish() {
      done_ = true;
      reader_.reset();
      bad_.finish();
    }

    const TarFileDataset* ds_;
    BadRecords bad_;
    std::unique_ptr<TarReader> reader_;
    int64_t index_ = 0;
    int64_t resume_ = 0;
    bool done_ = false;
  };
};

}  // namespace

DatasetPtr make_tar_source(const TarOptions& o) {
  return make_file_source<TarFileDataset>("tar", o);
}

}  // namespace dataecho
