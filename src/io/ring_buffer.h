// A byte ring of fixed capacity, the read-ahead buffer of an HTTP stream (private to io).
// Not thread-safe (guarded by the stream's mutex).
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

namespace dataecho::http {

class RingBuffer {
 public:
  explicit RingBuffer(size_t capacity) : data_(capacity) {}
  size_t size() const { return count_; }
  size_t capacity() const { return data_.size(); }
  size_t room() const { return data_.size() - count_; }
  void clear() { head_ = count_ = 0; }
  // Makes room for one chunk larger than the ring; only when empty.
  void grow_to(size_t n) {
    if (count_ == 0 && n > data_.size()) {
      data_.assign(n, 0);
      head_ = 0;
    }
  }
  void push(const char* src, size_t n) {
    size_t tail = (head_ + count_) % data_.size();
    size_t first = std::min(n, data_.size() - tail);
    std::memcpy(data_.data() + tail, src, first);
    std::memcpy(data_.data(), src + first, n - first);
    count_ += n;
  }
  size_t pop(char* dst, size_t n) {
    n = std::min(n, count_);
    size_t first = std::min(n, data_.size() - head_);
    if (dst) {
      std::memcpy(dst, data_.data() + head_, first);
      std::memcpy(dst + first, data_.data(), n - first);
    }
    head_ = (head_ + n) % data_.size();
    count_ -= n;
    if (count_ == 0) head_ = 0;
    return n;
  }

 private:
  std::vector<char> data_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace dataecho::http
