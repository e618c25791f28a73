#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

class RangeDataset : public Dataset {
 public:
  RangeDataset(int64_t begin, int64_t end) : begin_(begin), end_(end) {}
  std::string op_name() const override { return "range"; }

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
};

}  // namespace

DatasetPtr make_range(const RangeOptions& o) {
  if (o.count < 0)
    throw_error(ErrorCode::kInvalidArgument, "range",
                "count must be >= 0, got " + std::to_string(o.count));
  if (o.shards < 1)
    throw_error(ErrorCode::kInvalidArgument, "range",
                "shards must be >= 1, got " + std::to_string(o.shards));
  if (o.shards == 1) return std::make_shared<RangeDataset>(0, o.count);
  std::vector<std::shared_ptr<Dataset>> parts;
  for (int64_t i = 0; i < o.shards; ++i) {
    parts.push_back(
        std::make_shared<RangeDataset>(o.count * i / o.shards, o.count * (i + 1) / o.shards));
  }
  return make_sharded_source("range", std::move(parts));
}

}  // namespace dataecho
