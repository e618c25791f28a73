#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

// The examples [begin, end) of a vector shared with the datasets of its other ranges.
class MemoryDataset : public Dataset {
 public:
  MemoryDataset(std::shared_ptr<const std::vector<Example>> examples, size_t begin, size_t end)
      : examples_(std::move(examples)), begin_(begin), end_(end) {}
  std::string op_name() const override { return "memory"; }
  std::string not_seekable_reason() const override { return ""; }
  std::vector<ShardIndex> record_index() const override {
    ShardIndex ix;
    ix.records = static_cast<int64_t>(end_ - begin_);
    return {ix};
  }
  DatasetPtr record_range(const RecordRange& r) const override {
    check_record_range(label(), r, 1, static_cast<int64_t>(end_ - begin_));
    auto d = std::make_shared<MemoryDataset>(examples_, begin_ + static_cast<size_t>(r.begin),
                                             begin_ + static_cast<size_t>(r.end));
    if (node_stats()) d->attach(label(), node_stats());
    return d;
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(examples_, begin_, end_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const std::vector<Example>> ex, size_t begin, size_t end)
        : ex_(std::move(ex)), pos_(begin), begin_(begin), end_(end) {}
    void save(StateWriter& w) override {
      w.begin("memory");
      w.write_u64(pos_);
    }
    void restore(StateReader& r) override {
      r.expect("memory");
      pos_ = r.read_u64();
      if (pos_ < begin_ || pos_ > end_)
        throw_error(ErrorCode::kInvalidArgument, label(), "saved position out of range");
    }

   protected:
    std::optional<Example> next_impl() override {
      if (pos_ >= end_) return std::nullopt;
      return (*ex_)[pos_++];
    }

   private:
    std::shared_ptr<const std::vector<Example>> ex_;
    size_t pos_, begin_, end_;
  };

  std::shared_ptr<const std::vector<Example>> examples_;
  size_t begin_, end_;
};

}  // namespace

DatasetPtr make_memory_source(std::vector<Example> examples, bool keep_ids) {
  if (!keep_ids) {
    for (size_t i = 0; i < examples.size(); ++i) examples[i].set_id(static_cast<int64_t>(i));
  }
  const size_t n = examples.size();
  return std::make_shared<MemoryDataset>(
      std::make_shared<const std::vector<Example>>(std::move(examples)), 0, n);
}

}  // namespace dataecho
