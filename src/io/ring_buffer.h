// A byte ring of bounded capacity, the read-ahead buffer of an HTTP stream (private to io).
// Its memory is taken as bytes arrive (doubling, from 64 KiB, up to the capacity) and never
// zeroed: a stream of a 50 KB object does not allocate and fault in the whole read-ahead
// buffer. Not thread-safe (guarded by the stream's mutex).
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>

namespace dataecho::http {

class RingBuffer {
 public:
  explicit RingBuffer(size_t capacity) : capacity_(capacity) {}
  size_t size() const { return count_; }
  size_t capacity() const { return capacity_; }
  size_t room() const { return capacity_ - count_; }
  void clear() { head_ = count_ = 0; }
  // Makes room for one chunk larger than the ring; only when empty.
  void grow_to(size_t n) {
    if (count_ == 0 && n > capacity_) capacity_ = n;
  }
  // Needs n <= room().
  void push(const char* src, size_t n) {
    if (n == 0) return;
    reserve(count_ + n);
    size_t tail = (head_ + count_) % allocated_;
    size_t first = std::min(n, allocated_ - tail);
    std::memcpy(data_.get() + tail, src, first);
    std::memcpy(data_.get(), src + first, n - first);
    count_ += n;
  }
  size_t pop(char* dst, size_t n) {
    n = std::min(n, count_);
    if (n == 0) return 0;
    size_t first = std::min(n, allocated_ - head_);
    if (dst) {
      std::memcpy(dst, data_.get() + head_, first);
      std::memcpy(dst + first, data_.get(), n - first);
    }
    head_ = (head_ + n) % allocated_;
    count_ -= n;
    if (count_ == 0) head_ = 0;
    return n;
  }

 private:
  // At least `need` bytes allocated (need <= capacity_), the content moved to the start.
  void reserve(size_t need) {
    if (need <= allocated_) return;
    constexpr size_t kFirst = 64 << 10;
    const size_t next = std::max(need, std::min(capacity_, std::max(2 * allocated_, kFirst)));
    auto bigger = std::make_unique_for_overwrite<char[]>(next);
    const size_t kept = count_;
    pop(bigger.get(), kept);  // leaves the ring empty, head_ at 0
    count_ = kept;
    data_ = std::move(bigger);
    allocated_ = next;
  }

  std::unique_ptr<char[]> data_;
  size_t allocated_ = 0;
  size_t capacity_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace dataecho::http
