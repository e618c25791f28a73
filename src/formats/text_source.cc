// The `text` source (see dataecho/formats/text.h for its contract).
#include <cstring>

#include <nlohmann/json.hpp>

#include "dataecho/formats/text.h"
#include "dataecho/formats/tfrecord.h"
#include "file_source.h"
#include "gzip_reader.h"

namespace dataecho {

bool valid_utf8(std::string_view s, size_t* error_at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time.
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t min = 0, cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok) {
      if (error_at) *error_at = i;
      return false;
    }
    i += len;
  }
  return true;
}

namespace {

constexpr size_t kTextChunk = 64 << 10;

// The records of one stream, split by a separator. A record longer than `max` is
// reported as kTooLong and skipped without being held.
class RecordReader {
 public:
  enum class Status { kOk, kTooLong, kEnd };
  RecordReader(std::unique_ptr<ByteStream> in, uint64_t start, std::string sep, size_t max)
      : in_(std::move(in)), base_(start), sep_(std::move(sep)), max_(max) {}

  // The next record: the offset of its first byte and its bytes (valid until the next
  // call; empty for kTooLong).
  Status next(uint64_t* offset, std::string_view* record) {
    size_t scanned = 0;
    for (;;) {
      std::string_view avail(buf_.data() + begin_, end_ - begin_);
      const size_t from = scanned >= sep_.size() ? scanned - sep_.size() + 1 : 0;
      const size_t p = avail.find(sep_, from);
      *offset = base_ + begin_;
      if (p != std::string_view::npos) {
        begin_ += p + sep_.size();
        *record = avail.substr(0, p);
        return p > max_ ? Status::kTooLong : Status::kOk;
      }
      if (avail.size() > max_) return skip_long();
      if (eof_) {
        if (avail.empty()) return Status::kEnd;
        begin_ = end_;
        *record = avail;
        return Status::kOk;
      }
      scanned = avail.size();
      fill();
    }
  }
  // The offset of the next record.
  uint64_t position() const { return base_ + begin_; }

 private:
  // Reads on to the end of an over-long record, keeping only what may start a separator.
  Status skip_long() {
    const size_t keep = sep_.size() - 1;
    for (;;) {
      if (end_ - begin_ > keep) begin_ = end_ - keep;
      if (eof_) {
        begin_ = end_;
        return Status::kTooLong;
      }
      fill();
      std::string_view avail(buf_.data() + begin_, end_ - begin_);
      const size_t p = avail.find(sep_);
      if (p != std::string_view::npos) {
        begin_ += p + sep_.size();
        return Status::kTooLong;
      }
    }
  }
  // Appends up to one chunk from the stream; sets eof_ at its end.
  void fill() {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      base_ += begin_;
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() < end_ + kTextChunk) buf_.resize(end_ + kTextChunk);
    const size_t got = in_->read(buf_.data() + end_, kTextChunk);
    end_ += got;
    eof_ = got == 0;
  }

  std::unique_ptr<ByteStream> in_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  uint64_t base_;  // the stream offset of buf_[0]
  std::string sep_;
  size_t max_;
  bool eof_ = false;
};

// A JSON value as a tensor; false for a kind that has none (an object, null, a mixed list).
bool json_tensor(const nlohmann::json& v, Tensor* out) {
  if (v.is_string()) {
    *out = Tensor::from_bytes(v.get_ref<const std::string&>());
  } else if (v.is_boolean()) {
    *out = Tensor::scalar<uint8_t>(v.get<bool>() ? 1 : 0);
  } else if (v.is_number_integer()) {
    *out = Tensor::scalar<int64_t>(v.get<int64_t>());
  } else if (v.is_number()) {
    *out = Tensor::scalar<double>(v.get<double>());
  } else if (v.is_array()) {
    bool ints = true, numbers = true;
    for (const auto& x : v) {
      ints = ints && x.is_number_integer();
      numbers = numbers && x.is_number();
    }
    if (ints) {
      *out = Tensor::from_vector(v.get<std::vector<int64_t>>());
    } else if (numbers) {
      *out = Tensor::from_vector(v.get<std::vector<double>>());
    } else {
      return false;
    }
  } else {
    return false;
  }
  return true;
}

bool jsonl_example(std::string_view record, const TextOptions& o, Example& e, std::string* why) {
  auto j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *why =
        j.is_discarded() ? "not JSON" : std::string("a JSON ") + j.type_name() + ", not an object";
    return false;
  }
  auto add = [&](const std::string& name, const std::string& key, const nlohmann::json& v) {
    Tensor t;
    if (!json_tensor(v, &t)) {
      *why = "key \"" + key + "\" holds a " + v.type_name() +
             " (expected a string, number, boolean or list of numbers)";
      return false;
    }
    e.set(name, std::move(t));
    return true;
  };
  if (o.fields.empty()) {
    for (const auto& [key, v] : j.items())
      if (!add(key, key, v)) return false;
    return true;
  }
  for (const auto& [name, key] : o.fields) {
    auto it = j.find(key);
    if (it == j.end()) {
      *why = "no key \"" + key + "\"";
      return false;
    }
    if (!add(name, key, *it)) return false;
  }
  return true;
}

class TextIterator final : public FileIterator<TextOptions, RecordReader> {
 public:
  static constexpr const char* kOp = "text";
  using Base = FileDatasetBase<TextOptions>;
  explicit TextIterator(const Base* ds)
      : FileIterator(ds), offset_(ds->range_offset()), index_(ds->range_begin()) {}

  static std::string not_seekable(const Base& ds) {
    GzipSniffingReader in(open_stream(ds.uri(), ds.stream_options()));
    return in.compressed() ? compressed_reason("text file", ds.uri(), "gzip") : "";
  }
  // Each record's first byte, as read_one() finds them; the empty and over-long ones included.
  static ShardIndex index(const Base& ds) {
    const TextOptions& o = ds.options();
    const std::string key =
        std::string(kOp) + '\0' + o.separator + '\0' + std::to_string(o.max_bytes);
    return cached_record_index(ds.uri(), key, [&] {
      auto stream = open_stream(ds.uri(), ds.stream_options());
      ShardIndex ix;
      ix.uri = ds.uri();
      ix.bytes = stream->size();
      auto in = std::make_unique<GzipSniffingReader>(std::move(stream));
      if (in->compressed())
        throw_error(ErrorCode::kInvalidArgument, ds.label(),
                    compressed_reason("text file", ds.uri(), "gzip"));
      RecordReader reader(std::move(in), 0, o.separator, static_cast<size_t>(o.max_bytes));
      uint64_t at = 0;
      std::string_view record;
      while (reader.next(&at, &record) != RecordReader::Status::kEnd) ix.offsets.push_back(at);
      ix.records = static_cast<int64_t>(ix.offsets.size());
      ix.offsets.push_back(reader.position());
      return ix;
    });
  }

 private:
  int64_t next_record() const override { return index_; }
  void save_position(StateWriter& w) const override {
    w.write_u64(offset_);
    w.write_i64(index_);
    w.write_bool(compressed_);
  }
  void restore_position(StateReader& r) override {
    offset_ = r.read_u64();
    index_ = r.read_i64();
    compressed_ = r.read_bool();
  }

  std::optional<Example> read_one() override {
    const TextOptions& o = options();
    uint64_t at = 0;
    std::string_view record;
    auto st = reader_->next(&at, &record);
    if (st == RecordReader::Status::kEnd) {
      end_of_file();
      return std::nullopt;
    }
    offset_ = reader_->position();
    const int64_t index = index_++;
    if (o.separator == "\n" && !record.empty() && record.back() == '\r') record.remove_suffix(1);
    if (st == RecordReader::Status::kOk && record.empty() && !o.keep_empty) return std::nullopt;
    if (at >= (uint64_t{1} << kShardIdShift))
      throw_error(ErrorCode::kInvalidArgument, label(),
                  "a record past byte 2^40 (1 TiB): too far into the file for a stable id",
                  ds_->uri());
    std::string why;
    if (st == RecordReader::Status::kTooLong) {
      why = "record longer than max_bytes (" + std::to_string(o.max_bytes) + ")";
    } else {
      Example e(file_record_id(ds_->shard(), static_cast<int64_t>(at)));
      if (make_example(record, e, &why)) {
        bad_.good(e);
        return e;
      }
    }
    // Lines are numbered from 1, as editors do; records (in the input) from 0.
    if (o.separator == "\n") why = "line " + std::to_string(index + 1) + ": " + why;
    return bad_.bad(stats(), label(), why, index, at);
  }

  bool make_example(std::string_view record, Example& e, std::string* why) const {
    const TextOptions& o = options();
    size_t bad_at = 0;
    if (o.utf8 && !valid_utf8(record, &bad_at)) {
      *why = "invalid UTF-8 at byte " + std::to_string(bad_at) + " of the record";
      return false;
    }
    if (o.format == TextOptions::Format::kJsonLines) return jsonl_example(record, o, e, why);
    e.set("text", Tensor::from_bytes(record));
    return true;
  }

  // Opens the file at offset_: from its start (finding out whether it is gzip), sought
  // to offset_ when it is not, or read up to offset_ again when it is. At the start of a
  // record range (not yet known to be plain) the first bytes say whether it is gzip.
  void open() override {
    const TextOptions& o = options();
    auto stream = open_stream(ds_->uri(), o.stream);
    std::unique_ptr<ByteStream> in;
    if (offset_ > 0 && !compressed_) {
      if (ds_->range_begin() > 0 && offset_ == ds_->range_offset()) {
        unsigned char magic[2];
        if (stream->read_fully(magic, 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b)
          cannot_start("gzip");
      }
      stream->seek(offset_);
      in = std::move(stream);
    } else {
      auto gz = std::make_unique<GzipSniffingReader>(std::move(stream));
      compressed_ = gz->compressed();
      std::vector<char> scratch(offset_ > 0 ? kTextChunk : 0);
      for (uint64_t left = offset_; left > 0;) {
        const size_t got = gz->read(scratch.data(), std::min<uint64_t>(left, kTextChunk));
        if (got == 0)
          throw_error(ErrorCode::kDataLoss, label(),
                      "the file changed since the state was saved (it ends before byte " +
                          std::to_string(offset_) + ")",
                      ds_->uri());
        left -= got;
      }
      in = std::move(gz);
    }
    reader_ = std::make_unique<RecordReader>(std::move(in), offset_, o.separator,
                                             static_cast<size_t>(o.max_bytes));
  }

  uint64_t offset_;  // of the next record
  int64_t index_;    // records read (the next record's number)
  bool compressed_ = false;
};

}  // namespace

DatasetPtr make_text_source(const TextOptions& o) {
  if (o.separator.empty())
    throw_error(ErrorCode::kInvalidArgument, "text", "the separator may not be empty");
  if (o.max_bytes < 1)
    throw_error(ErrorCode::kInvalidArgument, "text",
                "max_bytes must be >= 1, got " + std::to_string(o.max_bytes));
  return make_file_source<TextIterator>(o);
}

}  // namespace dataecho
