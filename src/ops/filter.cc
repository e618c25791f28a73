#include "dataecho/ops/basic.h"

namespace dataecho {
namespace {

class FilterDataset : public Dataset {
 public:
  FilterDataset(DatasetPtr input, std::string name, Predicate p)
      : input_(std::move(input)), name_(std::move(name)), predicate_(std::move(p)) {}
  std::string op_name() const override { return "filter(" + name_ + ")"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), this);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, const FilterDataset* ds) : in_(std::move(in)), ds_(ds) {}
    void save(StateWriter& w) override {
      w.begin("filter");
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("filter");
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      while (auto e = in_->next()) {
        bool keep;
        try {
          keep = ds_->predicate_(*e);
        } catch (const Error& err) {
          throw err.with_context(label(), e->describe());
        } catch (const std::exception& ex) {
          throw Error(ErrorCode::kInvalidArgument, label(),
                      std::string("predicate failed: ") + ex.what(), e->describe());
        }
        if (keep) return e;
      }
      return std::nullopt;
    }

   private:
    std::unique_ptr<Iterator> in_;
    const FilterDataset* ds_;
  };

  DatasetPtr input_;
  std::string name_;
  Predicate predicate_;
};

}  // namespace

DatasetPtr make_filter(DatasetPtr input, std::string name, Predicate predicate) {
  return std::make_shared<FilterDataset>(std::move(input), std::move(name), std::move(predicate));
}

}  // namespace dataecho
