// SeqWindow: the results of a parallel map that are done and not yet emitted, by their
// position after the next one to emit, in a ring that grows but never shrinks. Filing a
// result and emitting one move it in and out of a slot the ring already has: no
// allocation per element once the ring has grown to the map's capacity (a node-based map
// allocated a node per result, freed on another thread than the one that made it, which
// for elements of tens of bytes cost as much as the rest of the handoff). Internal to
// src/ops; not thread-safe (the map holds its lock).
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace dataecho {

template <class T>
class SeqWindow {
 public:
  // Files `v` at `offset` positions after the front (0: the next to emit). The slot must
  // be empty.
  void put(size_t offset, T v) {
    if (offset >= slots_.size()) grow(offset + 1);
    slots_[index(offset)] = std::move(v);
    ++filled_;
    span_ = std::max(span_, offset + 1);
  }
  // Files `v` after every filed result (results kept in the order they were filed).
  void push_back(T v) { put(span_, std::move(v)); }

  bool front_filled() const { return span_ > 0 && slots_[head_].has_value(); }
  // The front's result; the next position becomes the front. front_filled() must hold.
  T pop_front() {
    T v = std::move(*slots_[head_]);
    slots_[head_].reset();
    head_ = (head_ + 1) % slots_.size();
    --filled_;
    --span_;
    return v;
  }
  // Filled slots from the front without a gap, counted up to `most`.
  size_t ready(size_t most) const {
    size_t n = 0;
    while (n < most && n < span_ && slots_[index(n)].has_value()) ++n;
    return n;
  }
  size_t filled() const { return filled_; }
  bool empty() const { return filled_ == 0; }

  // The filed results from the front on, in order (gaps skipped).
  template <class F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < span_; ++i)
      if (const auto& s = slots_[index(i)]) f(*s);
  }
  void clear() {
    for (auto& s : slots_) s.reset();
    head_ = filled_ = span_ = 0;
  }

 private:
  size_t index(size_t offset) const { return (head_ + offset) % slots_.size(); }
  // At least `need` slots, the front moved to slot 0.
  void grow(size_t need) {
    std::vector<std::optional<T>> bigger(std::max({need, 2 * slots_.size(), size_t{16}}));
    for (size_t i = 0; i < span_; ++i) bigger[i] = std::move(slots_[index(i)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<std::optional<T>> slots_;
  size_t head_ = 0;    // the front's slot
  size_t filled_ = 0;  // slots that hold a result
  size_t span_ = 0;    // positions from the front to the last filled one, inclusive
};

}  // namespace dataecho
