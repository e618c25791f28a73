#include "dataecho/ops/prefetch.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "dataecho/core/clock.h"
#include "worker_pause.h"

namespace dataecho {
namespace {

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, PrefetchOptions o) : input_(std::move(input)), o_(o) {}
  std::string op_name() const override { return "prefetch"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_, ctx, static_cast<size_t>(o_.buffer), node_stats());
  }

 private:
  // The worker pulls only when the buffer has room and no save() is in progress, so
  // every element it has taken from the input is in `buf_` whenever it is not inside
  // the input's next(): save() waits for that moment and writes the buffer.
  class It : public Iterator {
   public:
    It(DatasetPtr input, const IteratorContext& ctx, size_t cap, std::shared_ptr<NodeStats> stats)
        : token_(ctx.cancel->child()), cap_(cap), node_(std::move(stats)) {
      IteratorContext c = ctx;
      c.cancel = token_;
      in_ = input->make_iterator(c);
      registration_ = token_->on_cancel([this] {
        std::lock_guard<std::mutex> lock(mu_);
        consumer_cv_.notify_all();
        worker_cv_.notify_all();
      });
    }
    ~It() override {
      token_->cancel();
      if (worker_.joinable()) worker_.join();
      registration_.reset();
    }

    void save(StateWriter& w) override {
      std::unique_lock<std::mutex> lock(mu_);
      WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return !in_input_; });
      w.begin("prefetch");
      w.write_bool(input_done_);
      w.write_bool(error_ != nullptr);
      if (error_)
        throw_error(ErrorCode::kInvalidArgument, label(), "cannot save a pipeline that has failed");
      w.write_u64(buf_.size());
      for (const auto& e : buf_) w.write_example(e);
      pause.unlocked([&] { in_->save(w); });
    }
    void restore(StateReader& r) override {
      std::unique_lock<std::mutex> lock(mu_);
      WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return !in_input_; });
      r.expect("prefetch");
      input_done_ = r.read_bool();
      r.read_bool();
      uint64_t n = r.read_u64();
      buf_.clear();
      for (uint64_t i = 0; i < n; ++i) buf_.push_back(r.read_example());
      pause.unlocked([&] { in_->restore(r); });
    }

   protected:
    std::optional<Example> next_impl() override {
      std::unique_lock<std::mutex> lock(mu_);
      if (!worker_running_ && !input_done_) {
        if (worker_.joinable()) worker_.join();  // it ended before a restore() rewound the input
        worker_running_ = true;
        worker_ = std::thread([this] { run(); });
      }
      if (buf_.empty() && !input_done_ && !token_->cancelled()) {
        consumer_waiting_ = true;
        consumer_cv_.wait(lock,
                          [this] { return !buf_.empty() || input_done_ || token_->cancelled(); });
        consumer_waiting_ = false;
      }
      if (token_->cancelled()) throw_error(ErrorCode::kCancelled, label(), "pipeline cancelled");
      if (buf_.empty()) {
        if (error_) {
          auto err = error_;
          error_ = nullptr;
          std::rethrow_exception(err);
        }
        return std::nullopt;
      }
      Example e = std::move(buf_.front());
      buf_.pop_front();
      // Wake a waiting worker only once the buffer is down to half: it then refills
      // several elements per wake-up instead of one (a wake-up costs microseconds).
      if (worker_waiting_ && buf_.size() <= cap_ / 2) worker_cv_.notify_one();
      return e;
    }

   private:
    void run() {
      std::unique_lock<std::mutex> lock(mu_);
      run_locked(lock);
      worker_running_ = false;
    }
    void run_locked(std::unique_lock<std::mutex>& lock) {
      while (true) {
        int64_t t0 = now_ns();
        worker_waiting_ = true;
        worker_cv_.wait(lock,
                        [this] { return token_->cancelled() || (!paused_ && buf_.size() < cap_); });
        worker_waiting_ = false;
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
          buf_.push_back(std::move(*e));
        } else {
          input_done_ = true;
        }
        // The consumer waits only on an empty buffer (or, in save(), for in_input_); it
        // is woken once half the buffer is ready, so that it takes several elements
        // per wake-up, or at the end.
        if ((consumer_waiting_ && (input_done_ || buf_.size() >= std::max<size_t>(1, cap_ / 2))) ||
            paused_)
          consumer_cv_.notify_all();
        if (input_done_) return;
      }
    }

    std::shared_ptr<CancellationToken> token_;
    size_t cap_;
    std::shared_ptr<NodeStats> node_;
    std::unique_ptr<Iterator> in_;
    CancellationToken::Registration registration_;
    std::mutex mu_;
    std::condition_variable consumer_cv_;  // next() and save() wait here
    std::condition_variable worker_cv_;    // the worker waits here for room
    bool consumer_waiting_ = false;
    bool worker_waiting_ = false;
    std::deque<Example> buf_;
    bool in_input_ = false;
    bool worker_running_ = false;
    bool paused_ = false;
    bool input_done_ = false;
    std::exception_ptr error_;
    std::thread worker_;
  };

  DatasetPtr input_;
  PrefetchOptions o_;
};

}  // namespace

DatasetPtr make_prefetch(DatasetPtr input, const PrefetchOptions& o) {
  if (o.buffer < 1)
    throw_error(ErrorCode::kInvalidArgument, "prefetch",
                "buffer must be >= 1, got " + std::to_string(o.buffer));
  return std::make_shared<PrefetchDataset>(std::move(input), o);
}

}  // namespace dataecho
