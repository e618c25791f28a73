// BoundedQueue: a blocking FIFO of at most `capacity` items between threads.
// Thread-safe. Buffers at most `capacity` items: push() blocks while full, pop()
// while empty. Cancelling the token passed at construction wakes every blocked call:
// push() then returns false and pop() returns nullopt. close() marks the end of input:
// pop() drains what is left, then returns nullopt.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "dataecho/core/cancellation.h"
#include "dataecho/core/clock.h"

namespace dataecho {

template <class T>
class BoundedQueue {
 public:
  BoundedQueue(size_t capacity, const std::shared_ptr<CancellationToken>& token)
      : capacity_(capacity == 0 ? 1 : capacity), token_(token) {
    registration_ = token_->on_cancel([this] {
      std::lock_guard<std::mutex> lock(mu_);
      not_full_.notify_all();
      not_empty_.notify_all();
    });
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;
  ~BoundedQueue() { registration_.reset(); }

  // Blocks while full. Returns false (and drops `item`) if cancelled or closed.
  // Adds the time spent blocked to *blocked_ns when given.
  bool push(T item, int64_t* blocked_ns = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.size() >= capacity_ && !stopped()) {
      int64_t t0 = now_ns();
      not_full_.wait(lock, [this] { return items_.size() < capacity_ || stopped(); });
      if (blocked_ns) *blocked_ns += now_ns() - t0;
    }
    if (stopped()) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. Returns nullopt if cancelled, or when closed and drained.
  std::optional<T> pop(int64_t* blocked_ns = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.empty() && !closed_ && !token_->cancelled()) {
      int64_t t0 = now_ns();
      not_empty_.wait(lock, [this] { return !items_.empty() || closed_ || token_->cancelled(); });
      if (blocked_ns) *blocked_ns += now_ns() - t0;
    }
    if (token_->cancelled() || items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Non-blocking pop: nullopt if nothing is ready.
  std::optional<T> try_pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (items_.empty() || token_->cancelled()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }
  // Removes and returns everything queued (used when saving state while paused).
  std::deque<T> drain() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<T> out;
    out.swap(items_);
    not_full_.notify_all();
    return out;
  }

 private:
  bool stopped() const { return closed_ || token_->cancelled(); }

  const size_t capacity_;
  std::shared_ptr<CancellationToken> token_;
  CancellationToken::Registration registration_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace dataecho
