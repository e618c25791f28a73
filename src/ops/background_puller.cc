// The worker thread of prefetch and adaptive echo (see the header).
#include "background_puller.h"

#include <algorithm>

#include "dataecho/core/clock.h"
#include "dataecho/core/cpu_affinity.h"
#include "worker_pause.h"

namespace dataecho {
namespace {

// Whether spinning before a wait can pay: only with a second CPU for the other side.
bool may_spin() {
  static const bool yes = allowed_cpus().size() >= 2;
  return yes;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until `done()` or kSpinNs have passed (done() reads atomics only).
template <class F>
void spin_until(F done) {
  if (!may_spin()) return;
  const int64_t until = now_ns() + BackgroundPuller::kSpinNs;
  for (int i = 0; !done(); ++i) {
    cpu_relax();
    if ((i & 63) == 63 && now_ns() > until) return;
  }
}

}  // namespace

BackgroundPuller::BackgroundPuller(const DatasetPtr& input, const IteratorContext& ctx, Options o)
    : o_(std::move(o)), token_(ctx.cancel->child()) {
  o_.pull_batch = std::max<size_t>(1, o_.pull_batch);
  wake_worker_at_ = o_.wake_worker;
  IteratorContext c = ctx;
  c.cancel = token_;
  in_ = input->make_iterator(c);
  registration_ = token_->on_cancel([this] {
    std::lock_guard<std::mutex> lock(mu_);
    consumer_cv_.notify_all();
    worker_cv_.notify_all();
  });
}

BackgroundPuller::~BackgroundPuller() {
  token_->cancel();
  if (worker_.joinable()) worker_.join();
  registration_.reset();
}

bool BackgroundPuller::pop_local(std::optional<Example>& out) {
  Example& e = local_[local_pos_++];
  // Bytes are counted only under a byte capacity (Example::nbytes() walks every field's
  // shape: for a small element, a good part of its handoff).
  const size_t bytes = counts_bytes() ? e.nbytes() : 0;
  out = std::move(e);
  const size_t left = held_.fetch_sub(1) - 1;
  const size_t left_bytes = counts_bytes() ? held_bytes_.fetch_sub(bytes) - bytes : 0;
  return worker_waiting_.load() && (left <= wake_worker_at_.load(std::memory_order_relaxed) ||
                                    (counts_bytes() && left_bytes < o_.capacity_bytes));
}

void BackgroundPuller::refill_local() {
  // local_ is emitted here: the swap hands the whole shared part over in O(1), and the
  // shared part goes on in local_'s old storage.
  local_.clear();
  local_pos_ = 0;
  local_.swap(queue_);
}

BackgroundPuller::Take BackgroundPuller::take(std::optional<Example>& out, bool wait) {
  if (token_->cancelled()) throw_error(ErrorCode::kCancelled, o_.label, "pipeline cancelled");
  if (local_pos_ < local_.size()) {
    if (pop_local(out)) {
      std::lock_guard<std::mutex> lock(mu_);
      worker_cv_.notify_one();
    }
    return Take::kElement;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!worker_running_ && !input_done_) {
    if (worker_.joinable()) worker_.join();  // it ended before a restore() rewound the input
    worker_running_ = true;
    worker_ = start_engine_thread([this] { run(); });
  }
  if (wait && queue_.empty() && !input_done_ && !token_->cancelled()) {
    // The local part is empty: held_ counts the shared part alone.
    lock.unlock();
    spin_until([this] { return held_.load() > 0 || token_->cancelled(); });
    lock.lock();
  }
  if (wait && queue_.empty() && !input_done_ && !token_->cancelled()) {
    consumer_waiting_ = true;
    consumer_cv_.wait(lock,
                      [this] { return !queue_.empty() || input_done_ || token_->cancelled(); });
    consumer_waiting_ = false;
  }
  if (token_->cancelled()) throw_error(ErrorCode::kCancelled, o_.label, "pipeline cancelled");
  if (queue_.empty()) {
    if (!input_done_) return Take::kNotYet;
    if (error_) {
      auto err = error_;
      error_ = nullptr;
      std::rethrow_exception(err);
    }
    return Take::kEnd;
  }
  refill_local();
  if (pop_local(out)) worker_cv_.notify_one();
  return Take::kElement;
}

void BackgroundPuller::save(StateWriter& w, const Writer& write) {
  std::unique_lock<std::mutex> lock(mu_);
  WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return !in_input_; });
  // One queue in output order: the consumer's part, then the shared part.
  if (local_pos_ < local_.size()) {
    std::vector<Example> all;
    all.reserve(local_.size() - local_pos_ + queue_.size());
    for (size_t i = local_pos_; i < local_.size(); ++i) all.push_back(std::move(local_[i]));
    for (Example& e : queue_) all.push_back(std::move(e));
    queue_.swap(all);
  }
  local_.clear();
  local_pos_ = 0;
  write(queue_, input_done_, error_ != nullptr);
  pause.unlocked([&] { in_->save(w); });
}

void BackgroundPuller::restore(StateReader& r, const Reader& read) {
  std::unique_lock<std::mutex> lock(mu_);
  WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return !in_input_; });
  std::vector<Example> queue;
  bool input_done = false;
  read(queue, input_done);
  pause.unlocked([&] { in_->restore(r); });
  queue_ = std::move(queue);
  local_.clear();
  local_pos_ = 0;
  size_t bytes = 0;
  for (const Example& e : queue_) bytes += e.nbytes();
  held_ = queue_.size();
  held_bytes_ = bytes;
  input_done_ = input_done;
}

void BackgroundPuller::resize(size_t capacity, size_t wake_consumer, size_t wake_worker) {
  std::lock_guard<std::mutex> lock(mu_);
  o_.capacity = std::max<size_t>(1, capacity);
  o_.wake_consumer = std::clamp<size_t>(wake_consumer, 1, o_.capacity);
  o_.wake_worker = std::min(wake_worker, o_.capacity);
  wake_worker_at_ = o_.wake_worker;
  worker_cv_.notify_all();
  consumer_cv_.notify_all();
}

bool BackgroundPuller::has_room() const {
  const size_t held = held_.load();
  if (held >= o_.capacity) return false;
  return !counts_bytes() || held == 0 || held_bytes_.load() < o_.capacity_bytes;
}

bool BackgroundPuller::pull(std::vector<Example>& batch, size_t most, std::exception_ptr& err) {
  // held_ only falls while the worker pulls: what it read under mu_ is an upper bound.
  const size_t bytes0 = held_bytes_.load();
  size_t bytes = 0;
  const int64_t t0 = now_ns();
  int64_t t = t0;
  try {
    while (true) {
      std::optional<Example> e = in_->next();
      t = now_ns();
      if (!e) return true;
      if (counts_bytes()) bytes += e->nbytes();
      batch.push_back(std::move(*e));
      if (batch.size() >= most || t - t0 >= kPullBatchNs) break;
      if (counts_bytes() && bytes0 + bytes >= o_.capacity_bytes) break;
      if (token_->cancelled()) break;
    }
  } catch (...) {
    err = std::current_exception();
    t = now_ns();
  }
  if (o_.stats) o_.stats->wait_input_ns += t - t0;
  return err != nullptr;
}

void BackgroundPuller::run() {
  std::vector<Example> batch;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const int64_t t0 = now_ns();
    const auto may_pull = [this] { return token_->cancelled() || (!paused_ && has_room()); };
    // Raised only when it is about to sleep: the wait tests may_pull() again after it.
    if (!may_pull()) {
      // The capacity as of now (resize() changes it under the lock): for the spin only.
      const size_t capacity = o_.capacity;
      lock.unlock();
      spin_until([&] { return held_.load() < capacity || token_->cancelled(); });
      lock.lock();
    }
    if (!may_pull()) {
      worker_waiting_ = true;
      worker_cv_.wait(lock, may_pull);
      worker_waiting_ = false;
    }
    if (o_.stats) o_.stats->wait_output_ns += now_ns() - t0;
    if (token_->cancelled() || input_done_) break;
    in_input_ = true;
    const size_t most = std::min(o_.pull_batch, o_.capacity - held_.load());
    lock.unlock();
    batch.clear();
    std::exception_ptr err;
    const bool ended = pull(batch, most, err);
    lock.lock();
    in_input_ = false;
    size_t bytes = 0;
    for (Example& e : batch) {
      if (counts_bytes()) bytes += e.nbytes();
      queue_.push_back(std::move(e));
    }
    held_bytes_ += bytes;
    held_ += batch.size();
    if (ended) {
      error_ = err;
      input_done_ = true;
    }
    // The consumer waits only on an empty queue (or, in save(), for in_input_).
    if ((consumer_waiting_ && (input_done_ || queue_.size() >= o_.wake_consumer)) || paused_)
      consumer_cv_.notify_one();  // one thread waits there: the consumer's
    if (input_done_) break;
  }
  worker_running_ = false;
}

}  // namespace dataecho
