#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

class ConcatenateDataset : public Dataset {
 public:
  explicit ConcatenateDataset(std::vector<DatasetPtr> parts) : parts_(std::move(parts)) {}
  std::string op_name() const override { return "concatenate"; }
  std::vector<DatasetPtr> shards() const override { return parts_; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(parts_, ctx);
  }

 private:
  class It : public Iterator {
   public:
    It(const std::vector<DatasetPtr>& parts, const IteratorContext& ctx)
        : parts_(parts), ctx_(ctx) {}
    void save(StateWriter& w) override {
      w.begin("concatenate");
      w.write_u64(index_);
      w.write_bool(current_ != nullptr);
      if (current_) current_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("concatenate");
      index_ = r.read_u64();
      if (index_ > parts_.size())
        throw_error(ErrorCode::kInvalidArgument, label(), "saved shard index out of range");
      current_.reset();
      if (r.read_bool()) {
        current_ = parts_[index_]->make_iterator(ctx_);
        current_->restore(r);
      }
    }

   protected:
    std::optional<Example> next_impl() override {
      while (index_ < parts_.size()) {
        if (!current_) current_ = parts_[index_]->make_iterator(ctx_);
        if (auto e = current_->next()) return e;
        current_.reset();
        ++index_;
      }
      return std::nullopt;
    }

   private:
    const std::vector<DatasetPtr>& parts_;
    IteratorContext ctx_;
    size_t index_ = 0;
    std::unique_ptr<Iterator> current_;
  };

  std::vector<DatasetPtr> parts_;
};

}  // namespace

DatasetPtr make_concatenate(std::vector<DatasetPtr> parts) {
  return std::make_shared<ConcatenateDataset>(std::move(parts));
}

}  // namespace dataecho
