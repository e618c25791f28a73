#include "dataecho/ops/basic.h"

namespace dataecho {
namespace {

class TakeDataset : public Dataset {
 public:
  TakeDataset(DatasetPtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  std::string op_name() const override { return "take"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), count_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, int64_t count) : in_(std::move(in)), count_(count) {}
    void save(StateWriter& w) override {
      w.begin("take");
      w.write_i64(taken_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("take");
      taken_ = r.read_i64();
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      if (taken_ >= count_) return std::nullopt;
      auto e = in_->next();
      if (e)
        ++taken_;
      else
        taken_ = count_;
      return e;
    }

   private:
    std::unique_ptr<Iterator> in_;
    int64_t count_, taken_ = 0;
  };

  DatasetPtr input_;
  int64_t count_;
};

}  // namespace

DatasetPtr make_take(DatasetPtr input, int64_t count) {
  if (count < 0)
    throw_error(ErrorCode::kInvalidArgument, "take",
                "count must be >= 0, got " + std::to_string(count));
  return std::make_shared<TakeDataset>(std::move(input), count);
}

}  // namespace dataecho
