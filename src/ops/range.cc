#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

class RangeDataset : public Dataset {
 public:
  // `part`: one of the shards of a sharded range, which checks the shard number.
  RangeDataset(int64_t begin, int64_t end, bool part) : begin_(begin), end_(end), part_(part) {}
  std::string op_name() const override { return "range"; }
  std::string not_seekable_reason() const override { return ""; }
  std::vector<ShardIndex> record_index() const override {
    ShardIndex ix;
    ix.records = end_ - begin_;
    return {ix};
  }
  DatasetPtr record_range(const RecordRange& r) const override {
    check_record_range(label(), r, part_ ? -1 : 1, end_ - begin_);
    auto d = std::make_shared<RangeDataset>(begin_ + r.begin, begin_ + r.end, part_);
    if (node_stats()) d->attach(label(), node_stats());
    return d;
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(begin_, end_);
  }

 private:
  class It : public Iterator {
   public:
    It(int64_t begin, int64_t end) : pos_(begin), begin_(begin), end_(end) {}
    void save(StateWriter& w) override {
      w.begin("range");
      w.write_i64(pos_);
    }
    void restore(StateReader& r) override {
      r.expect("range");
      pos_ = r.read_i64();
      if (pos_ < begin_ || pos_ > end_)
        throw_error(ErrorCode::kInvalidArgument, label(), "saved position out of range");
    }

   protected:
    std::optional<Example> next_impl() override {
      if (pos_ >= end_) return std::nullopt;
      Example e(pos_);
      e.set("value", Tensor::scalar<int64_t>(pos_));
      ++pos_;
      return e;
    }

   private:
    int64_t pos_, begin_, end_;
  };

  int64_t begin_, end_;
  bool part_;
};

}  // namespace

DatasetPtr make_range(const RangeOptions& o) {
  if (o.count < 0)
    throw_error(ErrorCode::kInvalidArgument, "range",
                "count must be >= 0, got " + std::to_string(o.count));
  if (o.shards < 1)
    throw_error(ErrorCode::kInvalidArgument, "range",
                "shards must be >= 1, got " + std::to_string(o.shards));
  if (o.shards == 1) return std::make_shared<RangeDataset>(0, o.count, false);
  std::vector<std::shared_ptr<Dataset>> parts;
  for (int64_t i = 0; i < o.shards; ++i) {
    parts.push_back(
        std::make_shared<RangeDataset>(o.count * i / o.shards, o.count * (i + 1) / o.shards, true));
  }
  return make_sharded_source("range", std::move(parts));
}

}  // namespace dataecho
