// echo, fixed and fractional mode (see include/dataecho/ops/echo.h); the adaptive mode
// lives in adaptive_echo.cc. make_echo validates the options for both.
#include "dataecho/ops/echo.h"

#include "adaptive_echo.h"

#include <cmath>

#include "dataecho/core/rng.h"

namespace dataecho {
namespace {

class EchoDataset : public Dataset {
 public:
  EchoDataset(DatasetPtr input, EchoOptions o) : input_(std::move(input)), o_(o) {}
  std::string op_name() const override { return "echo"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    // Under `repeat`, each epoch draws other fractional repeats, as a shuffle reshuffles.
    // In an elastic pipeline's lane, the lane salts the draws (no salt outside one).
    uint64_t seed = lane_seed(mix_seed(o_.seed, static_cast<uint64_t>(ctx.epoch)), ctx.lane);
    return std::make_unique<It>(input_->make_iterator(ctx), o_.factor, seed, node_stats().get());
  }

 private:
  // Holds the element being repeated and how many copies of it are still due. The
  // copy handed out first is a copy of the input; the last repeat moves the held
  // element out, so an integer factor e costs e - 1 Example copies per input element.
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, double factor, uint64_t seed, NodeStats* node)
        : in_(std::move(in)),
          whole_(static_cast<int64_t>(std::floor(factor))),
          fraction_(factor - std::floor(factor)),
          rng_(seed),
          counters_(node) {}
    ~It() override { counters_.publish(); }

    void save(StateWriter& w) override {
      w.begin("echo");
      w.write_rng(rng_);
      w.write_i64(remaining_);
      w.write_i64(next_copy_);
      if (remaining_ > 0) w.write_example(held_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("echo");
      r.read_rng(rng_);
      int64_t remaining = r.read_i64();
      int64_t next_copy = r.read_i64();
      if (remaining < 0 || next_copy < 0 || remaining + next_copy > whole_ + 1) {
        throw_error(
            ErrorCode::kDataLoss, label(), "saved state does not fit this echo factor",
            "remaining " + std::to_string(remaining) + ", next copy " + std::to_string(next_copy));
      }
      held_ = remaining > 0 ? r.read_example() : Example();
      remaining_ = remaining;
      next_copy_ = next_copy;
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      if (remaining_ > 0) {
        Example out = --remaining_ == 0 ? std::move(held_) : held_;
        out.add_echo(static_cast<int32_t>(next_copy_++));
        counters_.emitted(false, static_cast<int64_t>(out.num_rows()));
        return out;
      }
      auto e = in_->next();
      if (!e) {
        counters_.publish();
        return e;
      }
      int64_t copies = whole_;
      if (fraction_ > 0 && rng_.bernoulli(fraction_)) ++copies;
      if (copies > 1) {
        held_ = *e;
        remaining_ = copies - 1;
        next_copy_ = 1;
      }
      counters_.emitted(true, static_cast<int64_t>(e->num_rows()));
      return e;
    }

   private:
    std::unique_ptr<Iterator> in_;
    const int64_t whole_;
    const double fraction_;
    Rng rng_;
    EchoCounters counters_;
    Example held_;
    int64_t remaining_ = 0;  // copies of held_ still due
    int64_t next_copy_ = 0;  // echo index of the next copy of held_
  };

  DatasetPtr input_;
  EchoOptions o_;
};

void check_factor(const char* name, double v) {
  if (!std::isfinite(v) || v < 1 || v > kMaxEchoFactor) {
    throw_error(ErrorCode::kInvalidArgument, "echo",
                std::string(name) + " must be a number in [1, " +
                    std::to_string(static_cast<int64_t>(kMaxEchoFactor)) + "], got " +
                    std::to_string(v));
  }
}

}  // namespace

void validate_echo_options(const EchoOptions& o) {
  if (o.adaptive) {
    check_factor("max_factor", o.max_factor);
    if (o.buffer < 1)
      throw_error(ErrorCode::kInvalidArgument, "echo",
                  "buffer must be >= 1, got " + std::to_string(o.buffer));
    if (o.buffer_bytes < 0)
      throw_error(
          ErrorCode::kInvalidArgument, "echo",
          "buffer_bytes must be >= 0 (0: no byte bound), got " + std::to_string(o.buffer_bytes));
  } else {
    check_factor("factor", o.factor);
    if (o.autotune)
      throw_error(ErrorCode::kInvalidArgument, "echo",
                  "autotune needs adaptive mode: the tuner sets an adaptive echo's cap");
  }
}

DatasetPtr make_echo(DatasetPtr input, const EchoOptions& o) {
  if (!input) throw_error(ErrorCode::kInvalidArgument, "echo", "no input");
  validate_echo_options(o);
  if (o.adaptive) return make_adaptive_echo(std::move(input), o);
  return std::make_shared<EchoDataset>(std::move(input), o);
}

}  // namespace dataecho
