#include "position_filter.h"

namespace dataecho {
namespace {

class PositionFilterDataset : public Dataset {
 public:
  PositionFilterDataset(DatasetPtr input, PositionRule rule)
      : input_(std::move(input)), rule_(std::move(rule)) {}
  std::string op_name() const override { return rule_.op; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), &rule_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, const PositionRule* rule) : in_(std::move(in)), rule_(rule) {}
    void save(StateWriter& w) override {
      w.begin(rule_->op);
      w.write_i64(rule_->to_saved ? rule_->to_saved(pos_) : pos_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect(rule_->op);
      const int64_t saved = r.read_i64();
      pos_ = rule_->from_saved ? rule_->from_saved(saved) : saved;
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      while (true) {
        const PositionVerdict v = rule_->verdict(pos_);
        if (v == PositionVerdict::kEnd) return std::nullopt;
        auto e = in_->next();
        if (!e) {
          if (rule_->at_end) pos_ = rule_->at_end(pos_);
          return std::nullopt;
        }
        ++pos_;
        if (v == PositionVerdict::kPass) return e;
      }
    }

   private:
    std::unique_ptr<Iterator> in_;
    const PositionRule* rule_;  // the dataset's, which the iterator keeps alive
    int64_t pos_ = 0;
  };

  DatasetPtr input_;
  PositionRule rule_;
};

}  // namespace

DatasetPtr make_position_filter(DatasetPtr input, PositionRule rule) {
  return std::make_shared<PositionFilterDataset>(std::move(input), std::move(rule));
}

}  // namespace dataecho
