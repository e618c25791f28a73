// WorkerPause: stops an operator's worker threads from taking input while save() or
// restore() runs, and runs the input's own save/restore meanwhile without the
// operator's mutex held. (The input may create iterators, and so take cancellation-
// token locks, while a token's cancel callback takes the operator's mutex: holding that
// mutex around the input's save/restore would invert the lock order; TSan found it.)
// Used by prefetch, parallel map and adaptive echo. Internal to src/ops.
#pragma once

#include <condition_variable>
#include <mutex>

namespace dataecho {

class WorkerPause {
 public:
  // With `lock` held: sets `paused` (the workers' wait predicates test it), then waits
  // on `wait_cv` until `idle()` (no worker holds an element outside the buffers).
  template <class Idle>
  WorkerPause(std::unique_lock<std::mutex>& lock, bool& paused, std::condition_variable& wait_cv,
              std::condition_variable& resume_cv, Idle idle)
      : lock_(lock), paused_(paused), resume_cv_(resume_cv) {
    paused_ = true;
    wait_cv.wait(lock_, idle);
  }
  // With the lock held again: lets the workers go on.
  ~WorkerPause() {
    paused_ = false;
    resume_cv_.notify_all();
  }
  WorkerPause(const WorkerPause&) = delete;
  WorkerPause& operator=(const WorkerPause&) = delete;

  // Runs `fn` with the lock released; the lock is held again when it returns or throws.
  template <class Fn>
  void unlocked(Fn fn) {
    lock_.unlock();
    try {
      fn();
    } catch (...) {
      lock_.lock();
      throw;
    }
    lock_.lock();
  }

 private:
  std::unique_lock<std::mutex>& lock_;
  bool& paused_;
  std::condition_variable& resume_cv_;
};

}  // namespace dataecho
