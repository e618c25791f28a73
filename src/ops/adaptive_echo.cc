// echo, adaptive mode (see include/dataecho/ops/echo.h): repeat only while the next
// fresh element is not ready. The thread pattern follows prefetch.cc.
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "adaptive_echo.h"
#include "dataecho/core/clock.h"
#include "dataecho/core/rng.h"
#include "dataecho/ops/echo.h"
#include "worker_pause.h"

namespace dataecho {
namespace {

class AdaptiveEchoDataset : public Dataset {
 public:
  AdaptiveEchoDataset(DatasetPtr input, EchoOptions o) : input_(std::move(input)), o_(o) {}
  std::string op_name() const override { return "echo(adaptive)"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_, ctx, o_, node_stats());
  }

 private:
  // Two bounded buffers under one mutex: `fresh_`, filled by the worker with elements
  // not yet emitted, and `pool_`, the recent fresh elements that may still be repeated,
  // each with the number of times it has been emitted. The worker pulls only when
  // `fresh_` has room and no save() is in progress, so every element it has taken from
  // the input is in `fresh_` whenever it is not inside the input's next(): save()
  // waits for that moment.
  class It : public Iterator {
   public:
    It(DatasetPtr input, const IteratorContext& ctx, const EchoOptions& o,
       std::shared_ptr<NodeStats> stats)
        : token_(ctx.cancel->child()),
          cap_(static_cast<size_t>(o.buffer)),
          max_copies_(static_cast<int64_t>(std::floor(o.max_factor))),
          rng_(mix_seed(o.seed, static_cast<uint64_t>(ctx.epoch))),
          node_(std::move(stats)),
          counters_(node_.get()) {
      IteratorContext c = ctx;
      c.cancel = token_;
      in_ = input->make_iterator(c);
      registration_ = token_->on_cancel([this] {
        std::lock_guard<std::mutex> lock(mu_);
        cv_.notify_all();
      });
    }
    ~It() override {
      token_->cancel();
      if (worker_.joinable()) worker_.join();
      registration_.reset();
      counters_.publish();
    }

    void save(StateWriter& w) override {
      std::unique_lock<std::mutex> lock(mu_);
      WorkerPause pause(lock, paused_, cv_, cv_, [this] { return !in_input_; });
      if (error_)
        throw_error(ErrorCode::kInvalidArgument, label(), "cannot save a pipeline that has failed");
      w.begin("adaptive_echo");
      w.write_bool(input_done_);
      w.write_rng(rng_);
      w.write_u64(fresh_.size());
      for (const auto& e : fresh_) w.write_example(e);
      w.write_u64(pool_.size());
      for (const auto& p : pool_) {
        w.write_example(p.element);
        w.write_i64(p.copies);
      }
      pause.unlocked([&] { in_->save(w); });
    }
    void restore(StateReader& r) override {
      std::unique_lock<std::mutex> lock(mu_);
      WorkerPause pause(lock, paused_, cv_, cv_, [this] { return !in_input_; });
      r.expect("adaptive_echo");
      bool input_done = r.read_bool();
      Rng rng;
      r.read_rng(rng);
      std::deque<Example> fresh;
      std::vector<Entry> pool;
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
          throw_error(ErrorCode::kDataLoss, label(),
                      "saved copy count " + std::to_string(p.copies) + " does not fit max_factor");
        }
        pool.push_back(std::move(p));
      }
      pause.unlocked([&] { in_->restore(r); });
      input_done_ = input_done;
      rng_ = rng;
      fresh_ = std::move(fresh);
      pool_ = std::move(pool);
      next_seq_ = pool_.size();
    }

   protected:
    std::optional<Example> next_impl() override {
      std::unique_lock<std::mutex> lock(mu_);
      if (!worker_running_ && !input_done_) {
        if (worker_.joinable()) worker_.join();  // it ended before a restore() rewound the input
        worker_running_ = true;
        worker_ = std::thread([this] { run(); });
      }
      while (true) {
        if (token_->cancelled()) throw_error(ErrorCode::kCancelled, label(), "pipeline cancelled");
        if (!fresh_.empty()) {
          Example e = std::move(fresh_.front());
          fresh_.pop_front();
          cv_.notify_all();
          if (max_copies_ > 1) remember(e);
          counters_.emitted(true, static_cast<int64_t>(e.num_rows()));
          return e;
        }
        if (input_done_) {
          counters_.publish();
          if (error_) {
            auto err = error_;
            error_ = nullptr;
            std::rethrow_exception(err);
          }
          return std::nullopt;
        }
        if (!pool_.empty()) {
          Example e = repeat();
          counters_.emitted(false, static_cast<int64_t>(e.num_rows()));
          return e;
        }
        cv_.wait(lock);
      }
    }

   private:
    struct Entry {
      Example element;  // as it came in (copy 0)
      int64_t copies;   // times emitted so far, < max_copies_
      uint64_t seq;     // arrival order, for eviction
    };

    // Adds a just-emitted fresh element to the repeat candidates; a full pool drops its
    // most-repeated entry (the oldest among equals).
    void remember(const Example& e) {
      if (pool_.size() >= cap_) {
        size_t victim = 0;
        for (size_t i = 1; i < pool_.size(); ++i) {
          const Entry& a = pool_[i];
          const Entry& v = pool_[victim];
          if (a.copies > v.copies || (a.copies == v.copies && a.seq < v.seq)) victim = i;
        }
        drop(victim);
      }
      pool_.push_back(Entry{e, 1, next_seq_++});
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
      if (++p.copies >= max_copies_) {
        out = std::move(p.element);
        drop(i);
      } else {
        out = p.element;
      }
      out.add_echo(echo);
      return out;
    }

    void drop(size_t i) {
      if (i + 1 != pool_.size()) pool_[i] = std::move(pool_.back());
      pool_.pop_back();
    }

    void run() {
      std::unique_lock<std::mutex> lock(mu_);
      run_locked(lock);
      worker_running_ = false;
    }
    void run_locked(std::unique_lock<std::mutex>& lock) {
      while (true) {
        int64_t t0 = now_ns();
        cv_.wait(lock,
                 [this] { return token_->cancelled() || (!paused_ && fresh_.size() < cap_); });
        if (node_) node_->wait_output_ns += now_ns() - t0;
        if (token_->cancelled() || input_done_) return;
        in_input_ = true;
        lock.unlock();
        std::optional<Example> e;
        std::exception_ptr err;
        int64_t t1 = now_ns();
        try {
          e = in_->next();
        } catch (...) {
          err = std::current_exception();
        }
        if (node_) node_->wait_input_ns += now_ns() - t1;
        lock.lock();
        in_input_ = false;
        if (err) {
          error_ = err;
          input_done_ = true;
        } else if (e) {
          fresh_.push_back(std::move(*e));
        } else {
          input_done_ = true;
        }
        cv_.notify_all();
        if (input_done_) return;
      }
    }

    std::shared_ptr<CancellationToken> token_;
    const size_t cap_;
    const int64_t max_copies_;
    Rng rng_;
    std::shared_ptr<NodeStats> node_;
    EchoCounters counters_;  // after node_, which it reads
    std::unique_ptr<Iterator> in_;
    CancellationToken::Registration registration_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Example> fresh_;
    std::vector<Entry> pool_;
    uint64_t next_seq_ = 0;
    bool in_input_ = false;
    bool worker_running_ = false;
    bool paused_ = false;
    bool input_done_ = false;
    std::exception_ptr error_;
    std::thread worker_;
  };

  DatasetPtr input_;
  EchoOptions o_;
};

}  // namespace

DatasetPtr make_adaptive_echo(DatasetPtr input, const EchoOptions& o) {
  return std::make_shared<AdaptiveEchoDataset>(std::move(input), o);
}

}  // namespace dataecho
