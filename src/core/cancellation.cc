#include "dataecho/core/cancellation.h"

namespace dataecho {

CancellationToken::Registration& CancellationToken::Registration::operator=(
    Registration&& o) noexcept {
  if (this != &o) {
    reset();
    token_ = std::move(o.token_);
    key_ = o.key_;
    o.token_.reset();
  }
  return *this;
}

void CancellationToken::Registration::reset() {
  if (auto t = token_.lock()) t->unregister(key_);
  token_.reset();
}

std::shared_ptr<CancellationToken> CancellationToken::make() {
  return std::shared_ptr<CancellationToken>(new CancellationToken());
}

std::shared_ptr<CancellationToken> CancellationToken::child() {
  auto c = make();
  std::weak_ptr<CancellationToken> weak = c;
  c->parent_registration_ = on_cancel([weak] {
    if (auto t = weak.lock()) t->cancel();
  });
  return c;
}

CancellationToken::~CancellationToken() = default;

// Callbacks run under the lock so that an object cannot unregister (and be destroyed)
// while its callback runs; callbacks only take their own, lower-ranked locks.
void CancellationToken::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.load()) return;
  cancelled_.store(true, std::memory_order_release);
  cv_.notify_all();
  for (auto& [key, fn] : callbacks_) fn();
  callbacks_.clear();
}

CancellationToken::Registration CancellationToken::on_cancel(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_.load()) {
      uint64_t key = next_key_++;
      callbacks_.emplace(key, std::move(fn));
      return Registration(weak_from_this(), key);
    }
  }
  fn();
  return Registration();
}

void CancellationToken::unregister(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_.erase(key);
}

bool CancellationToken::sleep_for(std::chrono::nanoseconds d) const {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return cancelled_.load(); });
}

}  // namespace dataecho
