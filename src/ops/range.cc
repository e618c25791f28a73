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

class ShardedRangeDataset : public Dataset {
 public:
  explicit ShardedRangeDataset(const RangeOptions& o) {
    int64_t n = o.shards;
    for (int64_t i = 0; i < n; ++i) {
      int64_t b = o.count * i / n, e = o.count * (i + 1) / n;
      parts_.push_back(std::make_shared<RangeDataset>(b, e));
    }
    whole_ = make_concatenate({parts_.begin(), parts_.end()});
  }
  std::string op_name() const override { return "range"; }
  std::vector<DatasetPtr> shards() const override { return {parts_.begin(), parts_.end()}; }
  void attach(std::string label, std::shared_ptr<NodeStats> stats) override {
    for (auto& p : parts_) p->attach(label, stats);
    Dataset::attach(std::move(label), std::move(stats));
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return whole_->make_iterator(ctx);
  }

 private:
  std::vector<std::shared_ptr<Dataset>> parts_;
  DatasetPtr whole_;
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
  return std::make_shared<ShardedRangeDataset>(o);
}

}  // namespace dataecho
