// BackgroundPuller: one worker thread that pulls an input ahead into a bounded queue, for
// the operators that decouple their consumer from their input: prefetch and adaptive
// echo. Internal to src/ops.
//
// The worker starts on the first take(), pulls only while the queue has room and no
// save() or restore() is in progress, and stops at the input's end, at its first error
// or when cancelled; the destructor cancels and joins it. The queue has two parts: the
// shared one, which the worker fills under the mutex, and the consumer's, which take()
// pops without the mutex and refills by taking the whole shared part at once (one lock
// per refill, not per element: for elements of tens of bytes a lock per element costs
// more than the element). The capacity bounds both parts together.
// The worker pulls up to `pull_batch` elements per lock while the input is cheap (under
// kPullBatchNs a batch); they enter the queue when the batch ends. Every element the
// worker has taken from the input is in the queue whenever it is not pulling a batch:
// save() pauses it at such a moment (WorkerPause), writes the queue through the
// operator's callback (the consumer's part first, then the shared part: the order the
// elements would have come out in), then the input's own state. Wake-ups are batched: a
// waiting consumer is woken once `wake_consumer` elements are queued (or at the end), a
// waiting worker once the queue is down to `wake_worker` or, with `capacity_bytes`,
// below its bytes (a wake-up costs microseconds).
// Before either side sleeps it spins for up to kSpinNs, watching the queue's count: when
// the other side is about to put an element down or take one, neither sleeps nor wakes.
// With elements of tens of bytes and a queue of a few, that is the whole cost of the
// hand-over (ops_bench on a 2-core VM: BM_Prefetch/4 143k -> 626k elements/s). A wait
// for a slow element costs at most kSpinNs of CPU more. Not where the process may run on
// one CPU only: there the spinner would hold the CPU the other side needs.
// Thread-safety: one consumer thread calls take(), save() and restore().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dataecho/core/dataset.h"

namespace dataecho {

class BackgroundPuller {
 public:
  struct Options {
    size_t capacity = 2;               // queued elements at most (>= 1)
    size_t capacity_bytes = 0;         // 0: none; else the worker pulls only while the queued
                                       // elements' bytes (Example::nbytes) are below it, so
                                       // the queue holds less than this plus one element
    size_t wake_consumer = 1;          // wake a waiting consumer at this many queued (1..capacity)
    size_t wake_worker = 1;            // wake a waiting worker when the queue is down to this
    size_t pull_batch = 1;             // elements the worker pulls per lock at most (>= 1)
    std::string label;                 // the operator's node label, for errors
    std::shared_ptr<NodeStats> stats;  // receives wait_input_ns and wait_output_ns
  };
  BackgroundPuller(const DatasetPtr& input, const IteratorContext& ctx, Options o);
  ~BackgroundPuller();
  BackgroundPuller(const BackgroundPuller&) = delete;
  BackgroundPuller& operator=(const BackgroundPuller&) = delete;

  // How long a side that would wait spins first (see above): about twice what waking a
  // sleeping thread takes on a VM.
  static constexpr int64_t kSpinNs = 20'000;

  enum class Take { kElement, kEnd, kNotYet };
  // A pull batch ends once it has spent this long in the input (the elements of an input
  // that takes this long or longer for each are queued one by one, as each comes).
  static constexpr int64_t kPullBatchNs = 20'000;

  // The next queued element into `out` (kElement). At the input's end, once the queue is
  // empty: kEnd, or the input's error is thrown (once). With `wait` false and nothing
  // queued yet: kNotYet at once. Throws kCancelled once the pipeline is cancelled.
  Take take(std::optional<Example>& out, bool wait);

  // The operator's part of the state: `write(queue, input_done, failed)` and
  // `read(queue, input_done)` handle the queue and whatever the operator keeps besides;
  // the input's state follows. restore() installs what `read` returned only once the
  // input has restored too.
  using Writer =
      std::function<void(const std::vector<Example>& queue, bool input_done, bool failed)>;
  using Reader = std::function<void(std::vector<Example>& queue, bool& input_done)>;
  void save(StateWriter& w, const Writer& write);
  void restore(StateReader& r, const Reader& read);

  // The input's iterator, for the operator to set up before the first take() (the
  // elastic merge hands a lane's map its RowPlacer).
  Iterator& input() { return *in_; }

  // A new capacity and wake-up points (an autotuned buffer), from any thread. Elements
  // queued above a smaller capacity stay; the worker waits until the queue is below it.
  void resize(size_t capacity, size_t wake_consumer, size_t wake_worker);

 private:
  void run();
  bool has_room() const;  // under mu_: the worker may pull one more element
  // Whether held_bytes_ is kept (capacity_bytes does not change after construction).
  bool counts_bytes() const { return o_.capacity_bytes != 0; }
  // Pulls up to `most` elements into `batch` (without mu_); true at the input's end or
  // error (`err`).
  bool pull(std::vector<Example>& batch, size_t most, std::exception_ptr& err);
  // Pops the consumer's part's first element into `out`; true when a waiting worker is
  // to be woken (the caller holds or takes mu_ to notify).
  bool pop_local(std::optional<Example>& out);
  // Under mu_: the consumer's part takes all of the shared part.
  void refill_local();

  Options o_;  // the sizes change only under mu_ (resize())
  std::shared_ptr<CancellationToken> token_;
  std::unique_ptr<Iterator> in_;
  CancellationToken::Registration registration_;
  std::mutex mu_;
  std::condition_variable consumer_cv_;  // take() and save() wait here
  std::condition_variable worker_cv_;    // the worker waits here for room
  // Vectors that swap and keep their capacity: no allocation per element once they have
  // grown (a deque allocates and frees a block every few elements, on two threads).
  std::vector<Example> queue_;  // the shared part
  std::vector<Example> local_;  // the consumer's part, from local_pos_ on: only the
  size_t local_pos_ = 0;        // consumer's thread touches these two
  // Both parts' elements and (with capacity_bytes) Example::nbytes() in all: the worker
  // adds under mu_, the consumer subtracts as it pops (without mu_).
  std::atomic<size_t> held_{0};
  std::atomic<size_t> held_bytes_{0};
  std::atomic<size_t> wake_worker_at_{1};  // o_.wake_worker, for pop_local()
  // Set by the worker under mu_ before it tests for room; the consumer reads it after
  // it has lowered held_, so that one of the two sees the other (both seq_cst).
  std::atomic<bool> worker_waiting_{false};
  bool consumer_waiting_ = false;
  bool in_input_ = false;  // the worker is pulling a batch
  bool worker_running_ = false;
  bool paused_ = false;
  bool input_done_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace dataecho
