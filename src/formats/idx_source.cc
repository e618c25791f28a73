// The `idx` source (see dataecho/formats/idx.h for its contract).
#include <iostream>
#include <mutex>

#include "dataecho/core/redact.h"
#include "dataecho/formats/idx.h"
#include "gzip_reader.h"

namespace dataecho {
namespace {

size_t idx_type_size(uint8_t type) {
  switch (type) {
    case 0x08:
    case 0x09:
      return 1;
    case 0x0B:
      return 2;
    case 0x0C:
    case 0x0D:
      return 4;
    case 0x0E:
      return 8;
    default:
      return 0;
  }
}

[[noreturn]] void idx_error(ErrorCode code, const std::string& uri, const std::string& why) {
  throw Error(code, "idx", why, uri);
}

IdxArray read_header(GzipSniffingReader& in, const std::string& uri) {
  unsigned char magic[4];
  size_t got = in.read_fully(magic, 4);
  if (got < 4)
    idx_error(ErrorCode::kDataLoss, uri,
              "file too short for an IDX header (" + std::to_string(got) + " bytes)");
  if (magic[0] != 0 || magic[1] != 0 || idx_type_size(magic[2]) == 0 || magic[3] == 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    idx_error(ErrorCode::kDataLoss, uri,
              std::string("not an IDX file: bad magic 0x") + hex +
                  " (expected 0x0000TTNN: type 08..0E, NN dimensions)");
  }
  IdxArray a;
  a.uri = uri;
  a.type = magic[2];
  int rank = magic[3];
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char d[4];
    if (in.read_fully(d, 4) < 4) idx_error(ErrorCode::kDataLoss, uri, "truncated IDX header");
    int64_t v = (int64_t{d[0]} << 24) | (int64_t{d[1]} << 16) | (int64_t{d[2]} << 8) | d[3];
    a.dims.push_back(v);
    if (v > 0 && total > (int64_t{1} << 40) / v)
      idx_error(ErrorCode::kDataLoss, uri, "IDX dimensions too large");
    total *= v;
  }
  return a;
}

int64_t item_bytes(const IdxArray& a) {
  int64_t n = static_cast<int64_t>(idx_type_size(a.type));
  for (size_t i = 1; i < a.dims.size(); ++i) n *= a.dims[i];
  return n;
}

int64_t be_int(const std::byte* p, uint8_t type) {
  auto u = [&](int i) { return static_cast<uint64_t>(static_cast<uint8_t>(p[i])); };
  switch (type) {
    case 0x08:
      return static_cast<int64_t>(u(0));
    case 0x09:
      return static_cast<int8_t>(u(0));
    case 0x0B:
      return static_cast<int16_t>((u(0) << 8) | u(1));
    case 0x0C:
      return static_cast<int32_t>((u(0) << 24) | (u(1) << 16) | (u(2) << 8) | u(3));
    default:
      return 0;
  }
}

}  // namespace

IdxArray read_idx_header(const std::string& uri, const StreamOptions& options) {
  StreamOptions o = options;
  o.buffer_bytes = 4096;
  GzipSniffingReader in(open_stream(uri, o));
  return read_header(in, uri);
}

IdxArray read_idx_file(const std::string& uri, const StreamOptions& options, bool allow_truncated) {
  GzipSniffingReader in(open_stream(uri, options));
  IdxArray a = read_header(in, uri);
  int64_t per = item_bytes(a);
  int64_t n = a.dims.empty() ? 0 : a.dims[0];
  size_t want = static_cast<size_t>(per * n);
  a.data = Buffer::allocate(want);
  size_t got = in.read_fully(a.data->mutable_data(), want);
  a.complete_items = per == 0 ? n : static_cast<int64_t>(got) / per;
  if (got < want && !allow_truncated) {
    idx_error(ErrorCode::kDataLoss, uri,
              "truncated IDX data: the header promises " + std::to_string(n) + " items of " +
                  std::to_string(per) + " bytes, the file holds " +
                  std::to_string(a.complete_items) + " (" + std::to_string(want - got) +
                  " bytes missing)");
  }
  return a;
}

namespace {

// Both files in memory, loaded by the first iterator.
struct IdxData {
  std::shared_ptr<const Buffer> images;
  std::vector<int64_t> labels;
  int64_t count = 0;
  int64_t bytes_lost = 0;
};

// What the datasets of an idx source (the whole and its ranges) share: the options, the
// shape and the files once loaded.
class IdxFiles {
 public:
  IdxFiles(IdxOptions o, const IdxArray& image_header, int64_t count)
      : o_(std::move(o)), count_(count) {
    const auto& d = image_header.dims;
    shape_ = {d[1], d[2], d.size() == 4 ? d[3] : 1};
    item_ = shape_[0] * shape_[1] * shape_[2];
  }
  const IdxOptions& options() const { return o_; }
  int64_t count() const { return count_; }
  const Shape& shape() const { return shape_; }
  int64_t item() const { return item_; }

  std::shared_ptr<const IdxData> load() {
    std::lock_guard<std::mutex> lock(mu_);
    if (data_) return data_;
    bool tolerant = o_.on_error != OnError::kFail;
    auto d = std::make_shared<IdxData>();
    IdxArray img = read_idx_file(o_.images, o_.stream, tolerant);
    int64_t complete = img.complete_items;
    if (!o_.labels.empty()) {
      IdxArray lab = read_idx_file(o_.labels, o_.stream, tolerant);
      complete = std::min(complete, lab.complete_items);
      d->labels.resize(static_cast<size_t>(std::min(complete, count_)));
      size_t sz = idx_type_size(lab.type);
      for (size_t i = 0; i < d->labels.size(); ++i)
        d->labels[i] = be_int(lab.data->data() + i * sz, lab.type);
    }
    d->images = img.data;
    d->count = std::min(complete, count_);
    if (d->count < count_) {
      d->bytes_lost = (count_ - d->count) * item_;
      std::cerr << "idx: " << redact_urls(o_.images) << ": truncated, " << d->count << " of "
                << count_ << " examples kept (" << d->bytes_lost << " image bytes lost)\n";
    }
    data_ = d;
    return data_;
  }

 private:
  IdxOptions o_;
  int64_t count_;
  Shape shape_;
  int64_t item_ = 0;
  std::mutex mu_;
  std::shared_ptr<const IdxData> data_;
};

// The examples [begin, end) of the files.
class IdxDataset : public Dataset {
 public:
  IdxDataset(std::shared_ptr<IdxFiles> files, int64_t begin, int64_t end)
      : files_(std::move(files)), begin_(begin), end_(end) {}
  std::string op_name() const override { return "idx"; }
  std::string not_seekable_reason() const override { return ""; }
  std::vector<ShardIndex> record_index() const override {
    ShardIndex ix;
    ix.uri = files_->options().images;
    ix.records = end_ - begin_;
    return {ix};
  }
  DatasetPtr record_range(const RecordRange& r) const override {
    check_record_range(label(), r, 1, end_ - begin_, files_->options().images);
    auto d = std::make_shared<IdxDataset>(files_, begin_ + r.begin, begin_ + r.end);
    if (node_stats()) d->attach(label(), node_stats());
    return d;
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(this, files_->load());
  }

 private:
  // Reads up to the range's end, or to the end of what a truncated file holds; only a
  // range that reaches that end counts the bytes lost.
  class It : public Iterator {
   public:
    It(const IdxDataset* ds, std::shared_ptr<const IdxData> data)
        : ds_(ds),
          data_(std::move(data)),
          pos_(ds->begin_),
          stop_(std::min(ds->end_, data_->count)) {}
    void save(StateWriter& w) override {
      w.begin("idx");
      w.write_i64(pos_);
    }
    void restore(StateReader& r) override {
      r.expect("idx");
      pos_ = r.read_i64();
      if (pos_ < ds_->begin_ || pos_ > stop_)
        throw_error(ErrorCode::kInvalidArgument, label(), "saved position out of range");
      lost_reported_ = pos_ >= stop_;
    }

   protected:
    std::optional<Example> next_impl() override {
      if (pos_ >= stop_) {
        if (!lost_reported_ && stop_ == data_->count && data_->bytes_lost > 0 && stats())
          stats()->counter("bytes_lost") += data_->bytes_lost;
        lost_reported_ = true;
        return std::nullopt;
      }
      const IdxFiles& f = *ds_->files_;
      Example e(pos_);
      e.set("image",
            Tensor(DType::kUInt8, f.shape(), data_->images, static_cast<size_t>(pos_ * f.item())));
      if (!data_->labels.empty())
        e.set("label", Tensor::scalar<int64_t>(data_->labels[static_cast<size_t>(pos_)]));
      ++pos_;
      return e;
    }

   private:
    const IdxDataset* ds_;
    std::shared_ptr<const IdxData> data_;
    int64_t pos_;
    const int64_t stop_;
    bool lost_reported_ = false;
  };

  std::shared_ptr<IdxFiles> files_;
  int64_t begin_, end_;
};

}  // namespace

DatasetPtr make_idx_source(const IdxOptions& o) {
  if (o.images.empty()) throw_error(ErrorCode::kInvalidArgument, "idx", "no images file given");
  IdxArray img = read_idx_header(o.images, o.stream);
  if (img.type != 0x08) {
    idx_error(ErrorCode::kInvalidArgument, o.images,
              "images must be of IDX type 0x08 (unsigned byte), found type " +
                  std::to_string(int{img.type}));
  }
  if (img.dims.size() != 3 && img.dims.size() != 4) {
    idx_error(ErrorCode::kInvalidArgument, o.images,
              "images must have 3 dimensions [N, H, W] or 4 [N, H, W, C], found " +
                  std::to_string(img.dims.size()));
  }
  int64_t count = img.dims[0];
  if (!o.labels.empty()) {
    IdxArray lab = read_idx_header(o.labels, o.stream);
    if (lab.type == 0x0D || lab.type == 0x0E || lab.dims.size() != 1) {
      idx_error(ErrorCode::kInvalidArgument, o.labels,
                "labels must be integers of 1 dimension [N]");
    }
    if (lab.dims[0] != count) {
      idx_error(ErrorCode::kInvalidArgument, o.labels,
                "holds " + std::to_string(lab.dims[0]) + " labels but " + o.images + " holds " +
                    std::to_string(count) + " images");
    }
  }
  if (o.limit >= 0) count = std::min(count, o.limit);
  return std::make_shared<IdxDataset>(std::make_shared<IdxFiles>(o, img, count), 0, count);
}

}  // namespace dataecho
