// echo, adaptive mode (see include/dataecho/ops/echo.h): repeat only while the next
// fresh element is not ready. Its input is pulled by a BackgroundPuller, as prefetch's.
// Tuned ("factor": "auto"), the cap on an element's copies is the tuner's knob.
#include <algorithm>
#include <cmath>
#include <deque>
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
          cap_bytes_(static_cast<size_t>(o.buffer_bytes)),
          max_copies_(static_cast<int64_t>(std::floor(o.max_factor))),
          knob_(std::move(knob)),
          rng_(mix_seed(o.seed, static_cast<uint64_t>(ctx.epoch))),
          node_(stats),
          counters_(node_.get()),
          puller_(input, ctx,
                  {.capacity = cap_,
                   .capacity_bytes = cap_bytes_,
                   .wake_consumer = 1,
                   .wake_worker = cap_ - 1,
                   .label = label,
                   .stats = std::move(stats)}) {}
    ~It() override { counters_.publish(); }

    void save(StateWriter& w) override {
      puller_.save(w, [&](const std::deque<Example>& fresh, bool input_done, bool failed) {
        if (failed)
          throw_error(ErrorCode::kInvalidArgument, label(),
                      "cannot save a pipeline that has failed");
        w.begin("adaptive_echo");
        w.write_bool(input_done);
        w.write_rng(rng_);
        w.write_u64(fresh.size());
        for (const auto& e : fresh) w.write_example(e);
        w.write_u64(pool_.size());
        for (const auto& p : pool_) {
          w.write_example(p.element);
          w.write_i64(p.copies);
        }
      });
    }
    void restore(StateReader& r) override {
      Rng rng;
      std::vector<Entry> pool;
      puller_.restore(r, [&](std::deque<Example>& fresh, bool& input_done) {
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
          Entry p{r.read_example(), r.read_i64(), static_cast<uint64_t>(i)};
          if (p.copies < 1 || p.copies >= max_copies_) {
            throw_error(
                ErrorCode::kDataLoss, label(),
                "saved copy count " + std::to_string(p.copies) + " does not fit max_factor");
          }
          pool.push_back(std::move(p));
        }
      });
      rng_ = rng;
      pool_ = std::move(pool);
      pool_bytes_ = 0;
      for (const Entry& p : pool_) pool_bytes_ += p.element.nbytes();
      next_seq_ = pool_.size();
    }

   protected:
    // A fresh element when one is ready; else, while the input is late, a repeat of a
    // recent one; with nothing to repeat, wait for the input.
    std::optional<Example> next_impl() override {
      const int64_t copies = knob_ ? knob_->value() : max_copies_;
      if (copies < copies_) forget(copies);  // the tuner lowered the cap
      copies_ = copies;
      std::optional<Example> e;
      switch (puller_.take(e, /*wait=*/pool_.empty())) {
        case BackgroundPuller::Take::kElement:
          if (copies_ > 1) remember(*e);
          counters_.emitted(true, static_cast<int64_t>(e->num_rows()));
          return e;
        case BackgroundPuller::Take::kEnd:
          counters_.publish();
          return std::nullopt;
        case BackgroundPuller::Take::kNotYet:
          break;
      }
      Example r = repeat();
      counters_.emitted(false, static_cast<int64_t>(r.num_rows()));
      return r;
    }

   private:
    struct Entry {
      Example element;  // as it came in (copy 0)
      int64_t copies;   // times emitted so far, < the cap
      uint64_t seq;     // arrival order, for eviction
    };

    // Adds a just-emitted fresh element to the repeat candidates; a full pool (in
    // elements or in bytes) drops its most-repeated entries (the oldest among equals)
    // until the new one fits, or the pool is empty.
    void remember(const Example& e) {
      const size_t bytes = e.nbytes();
      while (!pool_.empty() &&
             (pool_.size() >= cap_ || (cap_bytes_ != 0 && pool_bytes_ + bytes > cap_bytes_))) {
        size_t victim = 0;
        for (size_t i = 1; i < pool_.size(); ++i) {
          const Entry& a = pool_[i];
          const Entry& v = pool_[victim];
          if (a.copies > v.copies || (a.copies == v.copies && a.seq < v.seq)) victim = i;
        }
        remove(victim);
      }
      pool_.push_back(Entry{e, 1, next_seq_++});
      pool_bytes_ += bytes;
    }

    // A copy of the least-repeated candidate, ties broken by the Rng.
    Example repeat() {
      int64_t least = pool_.front().copies;
      size_t ties = 0;
      for (const auto& p : pool_) {
        if (p.copies < least) {
          least = p.copies;
          ties = 1;
        } else if (p.copies == least) {
          ++ties;
        }
      }
      size_t pick = ties > 1 ? static_cast<size_t>(rng_.uniform(ties)) : 0;
      size_t i = 0;
      for (;; ++i) {
        if (pool_[i].copies == least && pick-- == 0) break;
      }
      Entry& p = pool_[i];
      const int32_t echo = static_cast<int32_t>(p.copies);
      Example out;
      if (++p.copies >= copies_) {
        out = remove(i);
      } else {
        out = p.element;
      }
      out.add_echo(echo);
      return out;
    }

    // Drops the candidates that have been emitted `copies` times or more.
    void forget(int64_t copies) {
      std::erase_if(pool_, [&](const Entry& p) {
        if (p.copies < copies) return false;
        pool_bytes_ -= std::min(pool_bytes_, p.element.nbytes());
        return true;
      });
    }

    // Takes candidate i out of the pool (the last one takes its place).
    Example remove(size_t i) {
      pool_bytes_ -= std::min(pool_bytes_, pool_[i].element.nbytes());
      Example e = std::move(pool_[i].element);
      if (i + 1 != pool_.size()) pool_[i] = std::move(pool_.back());
      pool_.pop_back();
      return e;
    }

    const size_t cap_;
    const size_t cap_bytes_;                  // 0: none
    const int64_t max_copies_;                // floor(max_factor): a restored pool's bound
    const std::shared_ptr<const Knob> knob_;  // tuned: the cap
    int64_t copies_ = max_copies_;            // the cap on copies at the last next()
    Rng rng_;
    std::shared_ptr<NodeStats> node_;
    EchoCounters counters_;  // after node_, which it writes to
    std::vector<Entry> pool_;
    size_t pool_bytes_ = 0;  // the pool's elements' nbytes() in all
    uint64_t next_seq_ = 0;
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
