#include "dataecho/ops/basic.h"

namespace dataecho {
namespace {

class SkipDataset : public Dataset {
 public:
  SkipDataset(DatasetPtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  std::string op_name() const override { return "skip"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), count_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, int64_t count) : in_(std::move(in)), left_(count) {}
    void save(StateWriter& w) override {
      w.begin("skip");
      w.write_i64(left_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("skip");
      left_ = r.read_i64();
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      for (; left_ > 0; --left_) {
        if (!in_->next()) {
          left_ = 0;
          return std::nullopt;
        }
      }
      return in_->next();
    }

   private:
    std::unique_ptr<Iterator> in_;
    int64_t left_;
  };

  DatasetPtr input_;
  int64_t count_;
};

}  // namespace

DatasetPtr make_skip(DatasetPtr input, int64_t count) {
  if (count < 0)
    throw_error(ErrorCode::kInvalidArgument, "skip",
                "count must be >= 0, got " + std::to_string(count));
  return std::make_shared<SkipDataset>(std::move(input), count);
}

}  // namespace dataecho
