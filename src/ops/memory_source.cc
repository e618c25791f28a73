#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

class MemoryDataset : public Dataset {
 public:
  explicit MemoryDataset(std::vector<Example> examples)
      : examples_(std::make_shared<const std::vector<Example>>(std::move(examples))) {}
  std::string op_name() const override { return "memory"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(examples_);
  }

 private:
  class It : public Iterator {
   public:
    explicit It(std::shared_ptr<const std::vector<Example>> ex) : ex_(std::move(ex)) {}
    void save(StateWriter& w) override {
      w.begin("memory");
      w.write_u64(pos_);
    }
    void restore(StateReader& r) override {
      r.expect("memory");
      pos_ = r.read_u64();
      if (pos_ > ex_->size())
        throw_error(ErrorCode::kInvalidArgument, label(), "saved position out of range");
    }

   protected:
    std::optional<Example> next_impl() override {
      if (pos_ >= ex_->size()) return std::nullopt;
      return (*ex_)[pos_++];
    }

   private:
    std::shared_ptr<const std::vector<Example>> ex_;
    size_t pos_ = 0;
  };

  std::shared_ptr<const std::vector<Example>> examples_;
};

}  // namespace

DatasetPtr make_memory_source(std::vector<Example> examples, bool keep_ids) {
  if (!keep_ids) {
    for (size_t i = 0; i < examples.size(); ++i) examples[i].set_id(static_cast<int64_t>(i));
  }
  return std::make_shared<MemoryDataset>(std::move(examples));
}

}  // namespace dataecho
