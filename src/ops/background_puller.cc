// The worker thread of prefetch and adaptive echo (see the header).
#include "background_puller.h"

#include <algorithm>

#include "dataecho/core/clock.h"
#include "worker_pause.h"

namespace dataecho {

BackgroundPuller::BackgroundPuller(const DatasetPtr& input, const IteratorContext& ctx, Options o)
    : o_(std::move(o)), token_(ctx.cancel->child()) {
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

BackgroundPuller::Take BackgroundPuller::take(std::optional<Example>& out, bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!worker_running_ && !input_done_) {
    if (worker_.joinable()) worker_.join();  // it ended before a restore() rewound the input
    worker_running_ = true;
    worker_ = std::thread([this] { run(); });
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
  queued_bytes_ -= std::min(queued_bytes_, queue_.front().nbytes());
  out = std::move(queue_.front());
  queue_.pop_front();
  if (worker_waiting_ && (queue_.size() <= o_.wake_worker ||
                          (o_.capacity_bytes != 0 && queued_bytes_ < o_.capacity_bytes)))
    worker_cv_.notify_one();
  return Take::kElement;
}

void BackgroundPuller::save(StateWriter& w, const Writer& write) {
  std::unique_lock<std::mutex> lock(mu_);
  WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return !in_input_; });
  write(queue_, input_done_, error_ != nullptr);
  pause.unlocked([&] { in_->save(w); });
}

void BackgroundPuller::restore(StateReader& r, const Reader& read) {
  std::unique_lock<std::mutex> lock(mu_);
  WorkerPause pause(lock, paused_, consumer_cv_, worker_cv_, [this] { return !in_input_; });
  std::deque<Example> queue;
  bool input_done = false;
  read(queue, input_done);
  pause.unlocked([&] { in_->restore(r); });
  queue_ = std::move(queue);
  queued_bytes_ = 0;
  for (const Example& e : queue_) queued_bytes_ += e.nbytes();
  input_done_ = input_done;
}

void BackgroundPuller::resize(size_t capacity, size_t wake_consumer, size_t wake_worker) {
  std::lock_guard<std::mutex> lock(mu_);
  o_.capacity = std::max<size_t>(1, capacity);
  o_.wake_consumer = std::clamp<size_t>(wake_consumer, 1, o_.capacity);
  o_.wake_worker = std::min(wake_worker, o_.capacity);
  worker_cv_.notify_all();
  consumer_cv_.notify_all();
}

bool BackgroundPuller::has_room() const {
  if (queue_.size() >= o_.capacity) return false;
  return o_.capacity_bytes == 0 || queue_.empty() || queued_bytes_ < o_.capacity_bytes;
}

void BackgroundPuller::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const int64_t t0 = now_ns();
    worker_waiting_ = true;
    worker_cv_.wait(lock, [this] { return token_->cancelled() || (!paused_ && has_room()); });
    worker_waiting_ = false;
    if (o_.stats) o_.stats->wait_output_ns += now_ns() - t0;
    if (token_->cancelled() || input_done_) break;
    in_input_ = true;
    lock.unlock();
    std::optional<Example> e;
    std::exception_ptr err;
    const int64_t t1 = now_ns();
    try {
      e = in_->next();
    } catch (...) {
      err = std::current_exception();
    }
    if (o_.stats) o_.stats->wait_input_ns += now_ns() - t1;
    lock.lock();
    in_input_ = false;
    if (err) {
      error_ = err;
      input_done_ = true;
    } else if (e) {
      queued_bytes_ += e->nbytes();
      queue_.push_back(std::move(*e));
    } else {
      input_done_ = true;
    }
    // The consumer waits only on an empty queue (or, in save(), for in_input_).
    if ((consumer_waiting_ && (input_done_ || queue_.size() >= o_.wake_consumer)) || paused_)
      consumer_cv_.notify_all();
    if (input_done_) break;
  }
  worker_running_ = false;
}

}  // namespace dataecho
