// echo, adaptive mode (see include/dataecho/ops/echo.h): repeat only while the next
// fresh element is not ready. Its input is pulled by a BackgroundPuller, as prefetch's.
// Tuned ("factor": "auto"), the cap on an element's copies is the tuner's knob.
#include <algorithm>
#include <cmath>
#include <vector>

#include "adaptive_echo.h"
#include "background_puller.h"
#include "dataecho/core/rng.h"
#include "dataecho/core/tuner.h"
#include "dataecho/ops/echo.h"

namespace dataecho {
namespace {

class AdaptiveEchoDataset : public Dataset {
 public:
  AdaptiveEchoDataset(DatasetPtr input, EchoOptions o) : input_(std::move(input)), o_(o) {
    if (o_.autotune) {
      // Kept by the dataset, so that the cap outlasts an iterator (a repeat makes one per
      // pass). The buffers do not depend on the cap: queue plus pool.
      const int64_t held = 2 * o_.buffer + 1;
      knob_ = std::make_shared<Knob>(
          Knob::Kind::kEcho, "max_copies", 1, 1, static_cast<int64_t>(std::floor(o_.max_factor)),
          [held](int64_t) { return held; }, 2 * o_.buffer_bytes);
    }
  }
  std::string op_name() const override { return o_.autotune ? "echo(auto)" : "echo(adaptive)"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    if (knob_) {
      node_stats()->set_value("max_copies", static_cast<double>(knob_->value()));
      if (ctx.tuner) ctx.tuner->add(knob_, node_stats());
    }
    return std::make_unique<It>(input_, ctx, o_, knob_, node_stats(), label());
  }

 private:
  // The fresh elements come from a BackgroundPuller of `buffer` elements; `pool_` holds
  // the recent fresh elements that may still be repeated, each with the number of times
  // it has been emitted. Only the consumer's thread touches the pool (next(), save(),
  // restore()).
  class It : public Iterator {
   public:
    It(const DatasetPtr& input, const IteratorContext& ctx, const EchoOptions& o,
       std::shared_ptr<const Knob> knob, std::shared_ptr<NodeStats> stats, const std::string& label)
        : cap_(static_cast<size_t>(o.buffer)),
          max_copies_(static_cast<int64_t>(std::floor(o.max_factor))),
          knob_(std::move(knob)),
          pool_(cap_, static_cast<size_t>(o.buffer_bytes), max_copies_,
                Rng(mix_seed(o.seed, static_cast<uint64_t>(ctx.epoch)))),
          node_(stats),
          counters_(node_.get()),
          puller_(input, ctx,
                  {.capacity = cap_,
                   .capacity_bytes = static_cast<size_t>(o.buffer_bytes),
                   .wake_consumer = 1,
                   .wake_worker = cap_ - 1,
                   .label = label,
                   .stats = std::move(stats)}) {}
    ~It() override { counters_.publish(); }

    void save(StateWriter& w) override {
      puller_.save(w, [&](const std::vector<Example>& fresh, bool input_done, bool failed) {
        if (failed)
          throw_error(ErrorCode::kInvalidArgument, label(),
                      "cannot save a pipeline that has failed");
        w.begin("adaptive_echo");
        w.write_bool(input_done);
        w.write_rng(pool_.rng());
        w.write_u64(fresh.size());
        for (const auto& e : fresh) w.write_example(e);
        w.write_u64(pool_.entries().size());
        for (const auto& p : pool_.entries()) {
          w.write_example(p.element);
          w.write_i64(p.copies);
        }
      });
    }
    void restore(StateReader& r) override {
      Rng rng;
      std::vector<EchoPool::Entry> pool;
      puller_.restore(r, [&](std::vector<Example>& fresh, bool& input_done) {
        r.expect("adaptive_echo");
        input_done = r.read_bool();
        r.read_rng(rng);
        uint64_t n = r.read_u64();
        if (n > cap_)
          throw_error(ErrorCode::kDataLoss, label(),
                      "saved state has more queued elements than the buffer holds");
        for (uint64_t i = 0; i < n; ++i) fresh.push_back(r.read_example());
        n = r.read_u64();
        if (n > cap_)
          throw_error(ErrorCode::kDataLoss, label(),
                      "saved state has more repeat candidates than the buffer holds");
        for (uint64_t i = 0; i < n; ++i) {
          EchoPool::Entry p{r.read_example(), r.read_i64(), static_cast<uint64_t>(i)};
          if (p.copies < 1 || p.copies >= max_copies_) {
            throw_error(
                ErrorCode::kDataLoss, label(),
                "saved copy count " + std::to_string(p.copies) + " does not fit max_factor");
          }
          pool.push_back(std::move(p));
        }
      });
      pool_.reset(std::move(pool), rng);
    }

   protected:
    // A fresh element when one is ready; else, while the input is late, a repeat of a
    // recent one; with nothing to repeat, wait for the input.
    std::optional<Example> next_impl() override {
      pool_.set_copies(knob_ ? knob_->value() : max_copies_);  // the tuner may move the cap
      std::optional<Example> e;
      switch (puller_.take(e, /*wait=*/pool_.empty())) {
        case BackgroundPuller::Take::kElement:
          pool_.fresh(*e);
          counters_.emitted(true, static_cast<int64_t>(e->num_rows()));
          return e;
        case BackgroundPuller::Take::kEnd:
          counters_.publish();
          return std::nullopt;
        case BackgroundPuller::Take::kNotYet:
          break;
      }
      Example r = pool_.repeat();
      counters_.emitted(false, static_cast<int64_t>(r.num_rows()));
      return r;
    }

   private:
    const size_t cap_;
    const int64_t max_copies_;                // floor(max_factor): a restored pool's bound
    const std::shared_ptr<const Knob> knob_;  // tuned: the cap
    EchoPool pool_;                           // the repeat candidates
    std::shared_ptr<NodeStats> node_;
    EchoCounters counters_;    // after node_, which it writes to
    BackgroundPuller puller_;  // last: its worker is joined before the rest goes
  };

  DatasetPtr input_;
  EchoOptions o_;
  std::shared_ptr<Knob> knob_;  // tuned: the cap on copies
};

}  // namespace

DatasetPtr make_adaptive_echo(DatasetPtr input, const EchoOptions& o) {
  return std::make_shared<AdaptiveEchoDataset>(std::move(input), o);
}

}  // namespace dataecho
