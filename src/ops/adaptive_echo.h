// The adaptive mode of `echo` (include/dataecho/ops/echo.h), internal to src/ops:
// make_echo validates the options (validate_echo_options) and calls it. Also the echo
// counters both modes keep.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "dataecho/core/rng.h"
#include "dataecho/core/stats.h"
#include "dataecho/ops/echo.h"

namespace dataecho {

// The node's echo counters, looked up once per iterator (NodeStats::counter takes a lock).
// The echo counters of both modes, looked up once per iterator (NodeStats::counter
// takes a lock): rows emitted "fresh" (echo index 0) and "echoed", and the value
// "achieved_factor" published from them for the first 64 elements and every 64th after
// (a lock and a map lookup: not on every element), and at the end.
class EchoCounters {
 public:
  explicit EchoCounters(NodeStats* node)
      : node_(node),
        fresh_(node ? &node->counter("fresh") : nullptr),
        echoed_(node ? &node->counter("echoed") : nullptr) {}
  // One element emitted: fresh or a copy, of `rows` rows.
  void emitted(bool fresh, int64_t rows) {
    if (std::atomic<int64_t>* c = fresh ? fresh_ : echoed_)
      c->fetch_add(rows, std::memory_order_relaxed);
    if (++emitted_ <= 64 || (emitted_ & 63) == 0) publish();
  }
  void publish() {
    if (!node_) return;
    int64_t f = fresh_->load(std::memory_order_relaxed);
    int64_t e = echoed_->load(std::memory_order_relaxed);
    if (f > 0)
      node_->set_value("achieved_factor", static_cast<double>(f + e) / static_cast<double>(f));
  }

 private:
  NodeStats* node_;
  std::atomic<int64_t>* fresh_;
  std::atomic<int64_t>* echoed_;
  uint64_t emitted_ = 0;
};

// The repeat candidates of adaptive echo and its choice of what to repeat, apart from its
// thread: the iterator tells it each fresh element it emits, and asks it for a repeat when
// none is ready (whether one is ready is what adaptive echo decides on; a test tells the
// pool so itself, in any order it likes, and gets exact outputs). The candidates are the
// most recent fresh elements, at most `cap` of them and `cap_bytes` bytes (0: no byte
// bound), each with the number of times it has been emitted.
// Thread-safety: one thread at a time (the echo's consumer).
class EchoPool {
 public:
  struct Entry {
    Example element;  // as it came in (copy 0)
    int64_t copies;   // times emitted so far, < the cap on copies
    uint64_t seq;     // arrival order, for eviction
  };

  // `copies`: the cap on an element's copies, fresh one included (floor(max_factor), or
  // the tuner's knob); `rng`: breaks ties between candidates.
  EchoPool(size_t cap, size_t cap_bytes, int64_t copies, Rng rng)
      : cap_(cap), cap_bytes_(cap_bytes), copies_(copies), rng_(rng) {}

  // A new cap on copies; lowered (by the tuner), the candidates at it or above go.
  void set_copies(int64_t copies) {
    if (copies < copies_) forget(copies);
    copies_ = copies;
  }
  int64_t copies() const { return copies_; }
  bool empty() const { return pool_.empty(); }
  size_t size() const { return pool_.size(); }
  size_t bytes() const { return pool_bytes_; }

  // A fresh element was emitted: a repeat candidate, if the cap allows repeats. A full
  // pool (in elements or in bytes) drops its most-repeated entries (the oldest among
  // equals) until the new one fits, or the pool is empty.
  void fresh(const Example& e) {
    if (copies_ <= 1) return;
    const size_t bytes = e.nbytes();
    while (!pool_.empty() &&
           (pool_.size() >= cap_ || (cap_bytes_ != 0 && pool_bytes_ + bytes > cap_bytes_))) {
      size_t victim = 0;
      for (size_t i = 1; i < pool_.size(); ++i) {
        const Entry& a = pool_[i];
        const Entry& v = pool_[victim];
        if (a.copies > v.copies || (a.copies == v.copies && a.seq < v.seq)) victim = i;
      }
      remove(victim);
    }
    pool_.push_back(Entry{e, 1, next_seq_++});
    pool_bytes_ += bytes;
  }

  // A copy of the least-repeated candidate, ties broken by the Rng, its echo index
  // raised; it leaves the pool when it reaches the cap. The pool must not be empty.
  Example repeat() {
    int64_t least = pool_.front().copies;
    size_t ties = 0;
    for (const auto& p : pool_) {
      if (p.copies < least) {
        least = p.copies;
        ties = 1;
      } else if (p.copies == least) {
        ++ties;
      }
    }
    size_t pick = ties > 1 ? static_cast<size_t>(rng_.uniform(ties)) : 0;
    size_t i = 0;
    for (;; ++i) {
      if (pool_[i].copies == least && pick-- == 0) break;
    }
    Entry& p = pool_[i];
    const int32_t echo = static_cast<int32_t>(p.copies);
    Example out;
    if (++p.copies >= copies_) {
      out = remove(i);
    } else {
      out = p.element;
    }
    out.add_echo(echo);
    return out;
  }

  // For save() and restore().
  const std::vector<Entry>& entries() const { return pool_; }
  const Rng& rng() const { return rng_; }
  void reset(std::vector<Entry> pool, Rng rng) {
    rng_ = rng;
    pool_ = std::move(pool);
    pool_bytes_ = 0;
    for (const Entry& p : pool_) pool_bytes_ += p.element.nbytes();
    next_seq_ = pool_.size();
  }

 private:
  // Drops the candidates that have been emitted `copies` times or more.
  void forget(int64_t copies) {
    std::erase_if(pool_, [&](const Entry& p) {
      if (p.copies < copies) return false;
      pool_bytes_ -= std::min(pool_bytes_, p.element.nbytes());
      return true;
    });
  }

  // Takes candidate i out of the pool (the last one takes its place).
  Example remove(size_t i) {
    pool_bytes_ -= std::min(pool_bytes_, pool_[i].element.nbytes());
    Example e = std::move(pool_[i].element);
    if (i + 1 != pool_.size()) pool_[i] = std::move(pool_.back());
    pool_.pop_back();
    return e;
  }

  const size_t cap_;
  const size_t cap_bytes_;  // 0: none
  int64_t copies_;          // the cap on copies
  Rng rng_;
  std::vector<Entry> pool_;
  size_t pool_bytes_ = 0;  // the pool's elements' nbytes() in all
  uint64_t next_seq_ = 0;
};

DatasetPtr make_adaptive_echo(DatasetPtr input, const EchoOptions& options);

}  // namespace dataecho
