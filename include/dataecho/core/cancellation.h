// CancellationToken: how destroying a pipeline reaches every thread blocked inside it.
// Thread-safe. Tokens form a tree: cancelling one cancels its descendants, so a node
// can stop its own sub-pipeline (an interleave closing one shard) or the whole
// pipeline can stop at once. Blocking waits register a wake-up callback.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace dataecho {

class CancellationToken : public std::enable_shared_from_this<CancellationToken> {
 public:
  // A registration: the callback stays registered while this object lives.
  class Registration {
   public:
    Registration() = default;
    Registration(Registration&& o) noexcept : token_(std::move(o.token_)), key_(o.key_) {
      o.token_.reset();
    }
    Registration& operator=(Registration&& o) noexcept;
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration() { reset(); }
    void reset();

   private:
    friend class CancellationToken;
    Registration(std::weak_ptr<CancellationToken> t, uint64_t key)
        : token_(std::move(t)), key_(key) {}
    std::weak_ptr<CancellationToken> token_;
    uint64_t key_ = 0;
  };

  static std::shared_ptr<CancellationToken> make();
  // A child: cancelled with this token, or alone.
  std::shared_ptr<CancellationToken> child();

  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  void cancel();

  // Runs `fn` on cancel (at once, on this thread, if already cancelled). `fn` must not
  // block and must not register or unregister callbacks on this token.
  [[nodiscard]] Registration on_cancel(std::function<void()> fn);

  // Sleeps up to `d`; returns false early if cancelled (and then at once).
  bool sleep_for(std::chrono::nanoseconds d) const;

  ~CancellationToken();

 private:
  CancellationToken() = default;
  void unregister(uint64_t key);

  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t next_key_ = 1;
  std::map<uint64_t, std::function<void()>> callbacks_;
  Registration parent_registration_;
};

}  // namespace dataecho
