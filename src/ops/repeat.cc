#include "dataecho/ops/basic.h"

namespace dataecho {
namespace {

class RepeatDataset : public Dataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  std::string op_name() const override { return "repeat"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_, count_, ctx);
  }

 private:
  class It : public Iterator {
   public:
    It(DatasetPtr input, int64_t count, const IteratorContext& ctx)
        : input_(std::move(input)), count_(count), ctx_(ctx), base_epoch_(ctx.epoch) {}
    void save(StateWriter& w) override {
      w.begin("repeat");
      w.write_i64(pass_);
      w.write_bool(produced_in_pass_);
      w.write_bool(in_ != nullptr);
      if (in_) in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("repeat");
      pass_ = r.read_i64();
      produced_in_pass_ = r.read_bool();
      in_.reset();
      if (r.read_bool()) {
        open();
        in_->restore(r);
      }
    }

   protected:
    std::optional<Example> next_impl() override {
      while (count_ < 0 || pass_ < count_) {
        if (!in_) open();
        if (auto e = in_->next()) {
          produced_in_pass_ = true;
          // The trainer's fresh count keys on (id, epoch). An inner repeat has already
          // stamped its own, more specific pass (its context epoch includes ours).
          e->stamp_epoch(static_cast<int32_t>(pass_epoch()));
          return e;
        }
        in_.reset();
        bool empty_pass = !produced_in_pass_;
        produced_in_pass_ = false;
        ++pass_;
        if (empty_pass) break;  // an empty input repeated forever would spin
      }
      pass_ = count_ < 0 ? pass_ : count_;
      return std::nullopt;
    }

   private:
    void open() {
      IteratorContext c = ctx_;
      // Each pass is an epoch of its own; nested repeats multiply.
      c.epoch = pass_epoch();
      in_ = input_->make_iterator(c);
    }

    int64_t pass_epoch() const { return base_epoch_ * 1000003 + pass_; }

    DatasetPtr input_;
    int64_t count_;
    IteratorContext ctx_;
    int64_t base_epoch_;
    int64_t pass_ = 0;
    bool produced_in_pass_ = false;
    std::unique_ptr<Iterator> in_;
  };

  DatasetPtr input_;
  int64_t count_;
};

}  // namespace

DatasetPtr make_repeat(DatasetPtr input, int64_t count) {
  if (count < -1)
    throw_error(ErrorCode::kInvalidArgument, "repeat",
                "count must be >= 0, or -1 for forever; got " + std::to_string(count));
  return std::make_shared<RepeatDataset>(std::move(input), count);
}

}  // namespace dataecho
