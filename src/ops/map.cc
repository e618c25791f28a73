#include "dataecho/ops/map.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "dataecho/core/clock.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/core/tuner.h"
#include "map_and_batch.h"
#include "map_claim.h"
#include "seq_window.h"
#include "worker_pause.h"

namespace dataecho {
namespace {

// Runs the map function on output `seq` and turns whatever it throws into an Error
// naming the node, the function and the element. Fused with a batch (`placer`), the
// output's big tensor is computed straight into its row (see map_and_batch.h).
// The element is described for an error only when one is thrown (a text per element
// costs an allocation, as much as a small element's whole handoff); a single example's
// description is made from its id alone.
Example apply(const MapOptions& o, const MapContext& ctx, Example e, const std::string& label,
              RowPlacer* placer, int64_t seq) {
  const bool batch = e.is_batch();
  const std::string batch_where = batch ? e.describe() : std::string();
  const int64_t id = e.id();
  const auto describe = [&] { return batch ? batch_where : Example(id).describe(); };
  OutputSlot slot;
  bool armed = placer != nullptr && placer->slot_for(seq, &slot);
  ScopedOutputSlot scope(armed ? &slot : nullptr);
  try {
    return o.fn(std::move(e), ctx);
  } catch (const Error& err) {
    if (err.code() == ErrorCode::kCancelled) throw;
    const std::string where = describe();
    // The element is named once: an inner error that names the same element (a missing
    // field) keeps only its own stage and message.
    std::string inner = err.stage().empty() ? err.message() : err.stage() + ": " + err.message();
    if (!err.input().empty() && err.input() != where) inner += " (" + err.input() + ")";
    throw Error(err.code(), label, "function '" + o.name + "' failed: " + inner, where);
  } catch (const std::exception& ex) {
    throw Error(ErrorCode::kInvalidArgument, label,
                "function '" + o.name + "' failed: " + ex.what(), describe());
  }
}

class MapDataset : public Dataset, public RowPlacingDataset {
 public:
  MapDataset(DatasetPtr input, MapOptions o) : input_(std::move(input)), o_(std::move(o)) {
    if (o_.autotune) {
      // The knob lives with the dataset, so that the tuned value outlasts an iterator (a
      // repeat makes one per pass).
      const int64_t buffer = o_.buffer;
      knob_ = std::make_shared<Knob>(
          Knob::Kind::kParallelism, "parallelism", o_.parallelism, 1, o_.max_parallelism,
          [buffer](int64_t p) { return p + (buffer > 0 ? buffer : std::max<int64_t>(16, p)); });
    }
  }
  std::string op_name() const override { return "map(" + o_.name + ")"; }
  bool owns_threads() const override { return threaded(); }
  // One output per input, in input order: a batch above may be fused with it. Not when
  // unordered (the k-th output is not the k-th input's).
  bool keeps_order() const override { return o_.deterministic || !threaded(); }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    if (!threaded()) return std::make_unique<SyncIt>(input_->make_iterator(ctx), this, ctx);
    if (knob_ && ctx.tuner) ctx.tuner->add(knob_, node_stats());
    return std::make_unique<ParallelIt>(input_, this, ctx);
  }

 private:
  bool threaded() const { return o_.parallelism > 1 || o_.autotune; }

 private:
  class SyncIt : public Iterator, public RowPlacingIterator {
   public:
    SyncIt(std::unique_ptr<Iterator> in, const MapDataset* ds, const IteratorContext& ctx)
        : in_(std::move(in)), ds_(ds), token_(ctx.cancel) {}
    void set_row_placer(std::shared_ptr<RowPlacer> placer) override { placer_ = std::move(placer); }
    void save(StateWriter& w) override {
      w.begin("map");
      w.write_u64(0);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("map");
      if (r.read_u64() != 0)
        throw_error(ErrorCode::kInvalidArgument, label(), "saved state has buffered elements");
      in_->restore(r);
      seq_ = 0;
      if (placer_) placer_->reset();
    }

   protected:
    std::optional<Example> next_impl() override {
      if (failed_) return std::nullopt;
      try {
        auto e = in_->next();
        if (!e) return e;
        MapContext mc{ds_->o_.seed, token_.get()};
        return apply(ds_->o_, mc, std::move(*e), label(), placer_.get(), seq_++);
      } catch (...) {
        failed_ = true;  // the stream ends at its first error, as in parallel mode
        throw;
      }
    }

   private:
    std::unique_ptr<Iterator> in_;
    const MapDataset* ds_;
    std::shared_ptr<CancellationToken> token_;
    std::shared_ptr<RowPlacer> placer_;  // fused with the batch above
    int64_t seq_ = 0;                    // outputs since the start or restore()
    bool failed_ = false;
  };

  // Workers take a sequence number with each input element (under the input lock, so
  // numbers follow input order) and file the result under it. Ordered mode emits by
  // sequence number; unordered mode emits the oldest finished result. The consumer moves
  // every result it may emit now from `done_` to its own `ready_` under one lock, and
  // emits from `ready_` without the lock: one lock per batch of results, not per result
  // (for small elements a lock per result costs more than the result). A worker takes a new
  // element only while fewer than `capacity` are in flight, in `done_` or in `ready_`,
  // and never during save(), which waits until no worker holds an element outside
  // `done_`.
  class ParallelIt : public Iterator, public RowPlacingIterator {
   public:
    ParallelIt(DatasetPtr input, const MapDataset* ds, const IteratorContext& ctx)
        : ds_(ds), token_(ctx.cancel->child()) {
      IteratorContext c = ctx;
      c.cancel = token_;
      in_ = input->make_iterator(c);
      set_parallelism(ds_->knob_ ? static_cast<int>(ds_->knob_->value()) : ds_->o_.parallelism);
      registration_ = token_->on_cancel([this] {
        std::lock_guard<std::mutex> lock(mu_);
        consumer_cv_.notify_all();
        worker_cv_.notify_all();
        park_cv_.notify_all();
      });
      // The tuner's changes, on its thread.
      if (ds_->knob_) {
        knob_handle_ = ds_->knob_->listen([this](int64_t p) {
          std::lock_guard<std::mutex> lock(mu_);
          set_parallelism(static_cast<int>(p));
          // Workers above the old count start now, unless the pass has not begun (the
          // first next() starts them) or is over.
          if (running_ > 0 && !input_done_) {
            for (int i = static_cast<int>(workers_.size()); i < active_; ++i) {
              ++running_;
              workers_.push_back(start_engine_thread([this, i] { run(i); }));
            }
          }
          park_cv_.notify_all();
          worker_cv_.notify_all();
          consumer_cv_.notify_all();
        });
      }
    }
    ~ParallelIt() override {
      knob_handle_.reset();  // no tuner call from here on
      token_->cancel();
      for (auto& t : workers_) t.join();
      registration_.reset();
    }
    // Before the first next(): no worker runs yet.
    void set_row_placer(std::shared_ptr<RowPlacer> placer) override {
      std::lock_guard<std::mutex> lock(mu_);
      placer_ = std::move(placer);
    }

    // The results in emission order: `ready_`, then `done_`.
    void save(StateWriter& w) override {
      std::unique_lock<std::mutex> lock(mu_);
      WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return busy_ == 0; });
      bool failed = error_seq_ >= 0;
      for (size_t i = ready_pos_; i < ready_.size(); ++i) failed |= ready_[i].error != nullptr;
      done_.for_each([&](const Result& r) { failed |= r.error != nullptr; });
      if (failed)
        throw_error(ErrorCode::kInvalidArgument, label(), "cannot save a pipeline that has failed");
      w.begin("map");
      w.write_u64(ready_.size() - ready_pos_ + done_.filled());
      for (size_t i = ready_pos_; i < ready_.size(); ++i) w.write_example(*ready_[i].value);
      done_.for_each([&](const Result& r) { w.write_example(*r.value); });
      w.write_bool(input_done_);
      pause.unlocked([&] { in_->save(w); });
    }
    void restore(StateReader& r) override {
      std::unique_lock<std::mutex> lock(mu_);
      WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return busy_ == 0; });
      r.expect("map");
      uint64_t n = r.read_u64();
      ready_.clear();
      ready_pos_ = 0;
      done_.clear();
      emit_seq_ = 0;
      for (uint64_t i = 0; i < n; ++i) done_.push_back(Result{r.read_example(), nullptr});
      next_seq_ = static_cast<int64_t>(n);
      in_flight_ = static_cast<size_t>(n);
      input_done_ = r.read_bool();
      end_seq_ = input_done_ ? next_seq_ : -1;
      // Sequence numbers start at 0 again, so does the placer's numbering; no worker
      // holds a slot now.
      if (placer_) placer_->reset();
      pause.unlocked([&] { in_->restore(r); });
    }

   protected:
    std::optional<Example> next_impl() override {
      if (token_->cancelled()) throw_error(ErrorCode::kCancelled, label(), "pipeline cancelled");
      if (finished_ || (ready_pos_ == ready_.size() && !refill())) return std::nullopt;
      Result res = std::move(ready_[ready_pos_++]);
      // Wake a worker waiting for room once there is room for a few elements.
      const size_t left = in_flight_.fetch_sub(1) - 1;
      if (workers_waiting_.load() > 0 && left + wake_batch_ <= capacity_) {
        std::lock_guard<std::mutex> lock(mu_);
        worker_cv_.notify_one();
      }
      if (res.error) {
        finished_ = true;
        std::rethrow_exception(res.error);
      }
      return std::move(*res.value);
    }

   private:
    struct Result {
      std::optional<Example> value;
      std::exception_ptr error;
    };

    // With `ready_` emitted: moves the results that may be emitted now to `ready_`, waiting
    // for some; false at the end.
    bool refill() {
      std::unique_lock<std::mutex> lock(mu_);
      if (running_ == 0 && !input_done_) start();
      while (true) {
        if (token_->cancelled()) throw_error(ErrorCode::kCancelled, label(), "pipeline cancelled");
        if (take_done() > 0) return true;
        if (end_seq_ >= 0 && emit_seq_ >= end_seq_) return false;
        // Never sleep while a worker waits for room that there is: the consumer wakes a
        // worker only once there is room for wake_batch_ elements, and a claim taken when
        // the buffer was larger may hold more than capacity_ - wake_batch_.
        if (workers_waiting_.load() > 0 && in_flight_.load() < capacity_) worker_cv_.notify_one();
        consumer_waiting_ = true;
        // Timed: a worker that files results short of a wake batch and then spends long on
        // its next claim (a stalled read, a slow record) leaves them ready but unannounced;
        // the consumer looks again after kMapLookAgain.
        consumer_cv_.wait_for(lock, kMapLookAgain);
        consumer_waiting_ = false;
      }
    }

    // Under the lock, with `ready_` emitted: moves the results that may be emitted now
    // from `done_` to `ready_` (ordered: those that follow on emit_seq_ without a gap;
    // unordered: all, as they were filed), in order. `ready_` keeps its capacity.
    size_t take_done() {
      ready_.clear();
      ready_pos_ = 0;
      while (done_.front_filled()) {
        ready_.push_back(done_.pop_front());
        ++emit_seq_;
      }
      return ready_.size();
    }

    // Under the lock: files the result of input element `seq` (ordered: at its place after
    // emit_seq_; unordered: after every result filed so far).
    void file(int64_t seq, Result r) {
      if (ds_->o_.deterministic)
        done_.put(static_cast<size_t>(seq - emit_seq_), std::move(r));
      else
        done_.push_back(std::move(r));
    }

    // Called with the lock held when no worker runs: at the first next(), and again after
    // a restore() rewound an input that the workers had finished.
    void start() {
      for (auto& t : workers_) t.join();
      workers_.clear();
      running_ = active_;
      for (int i = 0; i < active_; ++i)
        workers_.push_back(start_engine_thread([this, i] { run(i); }));
    }

    // With the lock held (or in the constructor): `p` workers take input; the buffer
    // follows (p + buffer, or p + max(16, p) by default).
    void set_parallelism(int p) {
      active_ = std::max(1, p);
      size_buffer();
    }
    // With the lock held: the capacity for the parallelism and, with the default buffer,
    // for what the elements measured (map_cheap_buffer).
    void size_buffer() {
      size_t buffer = static_cast<size_t>(ds_->o_.buffer);
      if (buffer == 0)
        buffer = std::max({size_t{16}, static_cast<size_t>(active_),
                           map_cheap_buffer(mean_apply_ns_, mean_bytes_)});
      capacity_ = static_cast<size_t>(active_) + buffer;
      wake_batch_ = std::max<size_t>(1, capacity_ / 2);
    }

    // How many input elements a worker takes at once (map_claim.h). Called with the lock
    // held.
    size_t claim_size() const {
      return map_claim_size(mean_apply_ns_, capacity_, static_cast<size_t>(active_), in_flight_);
    }

    // A worker counts itself out in the same critical section in which it decides to
    // return. (Counting out under a second lock left a window: a restore() that rewound
    // the input in between saw workers still running, started none, and next() waited
    // forever for workers that had all returned.)
    void run(int index) {
      NodeStats* st = ds_->node_stats().get();
      // Looked up once (not under mu_): counter() takes the stats' lock and searches
      // their map. The workers' CPU time is what the tuner charges to the CPU budget.
      std::atomic<int64_t>* takes = st ? &st->counter("input_takes") : nullptr;
      std::atomic<int64_t>* cpu = st && ds_->knob_ ? &st->counter("cpu_ns") : nullptr;
      std::unique_lock<std::mutex> lock(mu_);
      run_locked(lock, index, st, takes, cpu);
      --running_;
    }
    // One worker's loop, about 90 lines: it gives up and takes back mu_ three times per
    // round (to take input, to apply the function, to put results down) and its
    // invariants hold across those points; split, each part would hand the lock, the
    // sequence numbers and the round's state to the next.
    // NOLINTNEXTLINE(readability-function-size)
    void run_locked(std::unique_lock<std::mutex>& lock, int index, NodeStats* st,
                    std::atomic<int64_t>* takes, std::atomic<int64_t>* cpu) {
      MapContext mc{ds_->o_.seed, token_.get()};
      std::vector<Example> taken;
      std::vector<Result> results;
      while (true) {
        // A worker above the tuned parallelism waits here, holding nothing.
        if (index >= active_) {
          park_cv_.wait(lock,
                        [&] { return token_->cancelled() || input_done_ || index < active_; });
        }
        int64_t t0 = now_ns();
        const auto may_take = [this] {
          return token_->cancelled() || input_done_ ||
                 (!paused_ && !input_busy_ && in_flight_.load() < capacity_);
        };
        if (!may_take()) {  // counted only when about to sleep: the wait tests again after
          // Never sleep while the consumer waits for results it could take: filed
          // results wake it only once wake_batch_ are done, and a claim held by a slow
          // element (taken when the buffer was larger) may keep them from ever being so.
          if (consumer_waiting_ && done_.front_filled()) consumer_cv_.notify_one();
          ++workers_waiting_;
          worker_cv_.wait(lock, may_take);
          --workers_waiting_;
        }
        if (st) st->wait_output_ns += now_ns() - t0;
        if (token_->cancelled() || input_done_) return;
        // Take the next input elements; only this worker reads the input now.
        const size_t want = claim_size();
        if (takes) takes->fetch_add(1, std::memory_order_relaxed);
        input_busy_ = true;
        ++busy_;
        lock.unlock();
        taken.clear();
        std::exception_ptr err;
        bool ended = false;
        int64_t t1 = now_ns();
        try {
          while (taken.size() < want) {
            auto e = in_->next();
            if (!e) {
              ended = true;
              break;
            }
            taken.push_back(std::move(*e));
          }
        } catch (...) {
          err = std::current_exception();
        }
        int64_t t2 = now_ns();
        if (st) st->wait_input_ns += t2 - t1;
        lock.lock();
        input_busy_ = false;
        const int64_t first_seq = next_seq_;
        next_seq_ += static_cast<int64_t>(taken.size());
        in_flight_ += taken.size();
        if (err || ended) {
          input_done_ = true;
          if (err) {
            error_seq_ = next_seq_;
            file(next_seq_++, Result{std::nullopt, err});
            ++in_flight_;
          }
          end_seq_ = next_seq_;
          consumer_cv_.notify_all();
          worker_cv_.notify_all();
        } else if (workers_waiting_ > 0) {
          worker_cv_.notify_one();  // the input is free again: the next worker may take
        }
        lock.unlock();
        const int64_t c0 = cpu ? thread_cpu_ns() : 0;
        results.clear();
        size_t bytes = 0;
        for (size_t i = 0; i < taken.size() && !token_->cancelled(); ++i) {
          Result res;
          // What the element holds on either side of the function: the buffer's size
          // follows the larger (a cheap map of large records to small results is not
          // given room for many large records).
          const size_t in_bytes = taken[i].nbytes();
          try {
            res.value = apply(ds_->o_, mc, std::move(taken[i]), label(), placer_.get(),
                              first_seq + static_cast<int64_t>(i));
            bytes += std::max(in_bytes, res.value->nbytes());
          } catch (...) {
            res.error = std::current_exception();
          }
          results.push_back(std::move(res));
        }
        const int64_t t3 = now_ns();
        if (st) st->busy_ns += t3 - t2;
        if (cpu) cpu->fetch_add(thread_cpu_ns() - c0, std::memory_order_relaxed);
        lock.lock();
        if (!results.empty()) {
          const auto n = static_cast<double>(results.size());
          const double per = static_cast<double>(t3 - t2) / n;
          const double per_bytes = static_cast<double>(bytes) / n;
          const bool first = mean_apply_ns_ <= 0;
          mean_apply_ns_ = first ? per : 0.875 * mean_apply_ns_ + 0.125 * per;
          mean_bytes_ = first ? per_bytes : 0.875 * mean_bytes_ + 0.125 * per_bytes;
          if (ds_->o_.buffer == 0) size_buffer();
        }
        for (size_t i = 0; i < results.size(); ++i)
          file(first_seq + static_cast<int64_t>(i), std::move(results[i]));
        --busy_;
        // Wake the consumer when it can take a few results at once (a wake-up costs
        // several microseconds on a VM) or the input has ended, or when save() waits for the
        // workers to put their elements down. Also when a few results are done but wait
        // behind one still being made (a slow element): it takes those it may emit now
        // (done_'s front is filled: the consumer can emit at least one now).
        if (paused_ || (consumer_waiting_ &&
                        (end_seq_ >= 0 || (done_.filled() >= wake_batch_ && done_.front_filled()))))
          consumer_cv_.notify_one();  // one thread waits there: the consumer's
        if (ended || err || token_->cancelled()) return;
      }
    }

    const MapDataset* ds_;
    std::shared_ptr<CancellationToken> token_;
    std::shared_ptr<RowPlacer> placer_;  // fused with the batch above
    std::unique_ptr<Iterator> in_;
    // Both change under mu_ (the tuner's set_parallelism()); next_impl() reads them
    // without it.
    std::atomic<size_t> capacity_{0};
    // The consumer is woken when this many results are ready (or at the end), and a
    // worker waiting for room when there is room for this many: half the capacity.
    std::atomic<size_t> wake_batch_{1};
    CancellationToken::Registration registration_;
    std::mutex mu_;
    std::condition_variable consumer_cv_;  // next() and save() wait here
    std::condition_variable worker_cv_;    // workers wait here for the input and for room
    std::condition_variable park_cv_;      // workers above the tuned parallelism wait here
    int active_ = 1;                       // workers that take input (the parallelism)
    Knob::Handle knob_handle_;
    bool consumer_waiting_ = false;
    // Raised by a worker under mu_ before it tests for room; next_impl() reads it after
    // lowering in_flight_, so that one of the two sees the other (both seq_cst).
    std::atomic<int> workers_waiting_{0};
    SeqWindow<Result> done_;     // done, not yet moved to ready_
    std::vector<Result> ready_;  // the consumer's: only its thread touches it
    size_t ready_pos_ = 0;       // ready_'s next to emit
    // Elements taken from the input and not yet emitted (in a worker's hands, in done_ or
    // in ready_): what the capacity bounds.
    std::atomic<size_t> in_flight_{0};
    double mean_apply_ns_ = 0;  // per element, recent claims weighted most
    double mean_bytes_ = 0;     // per element, the larger of its input and result, weighted alike
    int64_t next_seq_ = 0;      // sequence number of the next input element
    int64_t emit_seq_ = 0;      // results moved to ready_
    int64_t end_seq_ = -1;      // once the input ended: the number of elements in all
    int64_t error_seq_ = -1;
    int busy_ = 0;     // workers holding an element outside done_
    int running_ = 0;  // workers that have not returned
    bool input_busy_ = false;
    bool input_done_ = false;
    bool paused_ = false;
    bool finished_ = false;
    std::vector<std::thread> workers_;
  };

  DatasetPtr input_;
  MapOptions o_;
  std::shared_ptr<Knob> knob_;  // autotuned parallelism
};

}  // namespace

DatasetPtr make_map(DatasetPtr input, MapOptions o) {
  if (!o.fn) throw_error(ErrorCode::kInvalidArgument, "map", "no function given");
  if (o.parallelism < 1)
    throw_error(ErrorCode::kInvalidArgument, "map",
                "parallelism must be >= 1, got " + std::to_string(o.parallelism));
  if (o.buffer < 0)
    throw_error(ErrorCode::kInvalidArgument, "map",
                "buffer must be >= 0, got " + std::to_string(o.buffer));
  return std::make_shared<MapDataset>(std::move(input), std::move(o));
}

}  // namespace dataecho
