// Sharding "static" on the consumer's side: its pieces' elements in its order
// (static_order in dispatcher_state.h: its lanes round robin, each lane's pieces in piece
// order), whatever order the lanes' streams deliver them in. Each piece's elements wait
// in a buffer of their own until the piece's turn. Not thread-safe: the service source's
// lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "dataecho/core/example.h"

namespace dataecho::service {

class StaticMerge {
 public:
  // The epoch's order; `done(piece)` and `kept(piece)`: a restored state's position (the
  // pieces wholly returned, which are a prefix of the order, and the records of the next
  // one returned).
  void start(std::vector<int64_t> order, const std::function<bool(int64_t)>& done,
             const std::function<int64_t(int64_t)>& kept);
  bool started() const { return started_; }
  // Whether an element of `bytes` of `piece` may be buffered now: the piece whose turn it
  // is while its buffer is empty or all buffers stay within `limit`, any other while
  // they stay within half of it (the other half is the current piece's), so a piece
  // read ahead never stops the current one.
  bool admits(int64_t piece, size_t bytes, size_t limit) const;
  void add(int64_t piece, int64_t record, Example e, size_t bytes);

  enum class Take { kElement, kWait, kEnd };
  // The next element in the order (kElement), none yet (kWait), or the end of the
  // order (kEnd). `done(piece)`: whether every record of the piece has come.
  Take take(const std::function<bool(int64_t)>& done, Example& out);
  // The position, in the service state's form: {"piece_records": {the current piece:
  // its records returned}, "done_pieces": [the pieces wholly returned]}.
  nlohmann::json lane_state() const;
  size_t bytes() const { return bytes_; }

 private:
  struct Item {
    Example example;
    int64_t record = 0;
    size_t bytes = 0;
  };
  bool started_ = false;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;     // order_[cursor_] is the piece whose turn it is
  int64_t returned_ = 0;  // its records returned (the last one's + 1)
  std::map<int64_t, std::deque<Item>> buffered_;
  size_t bytes_ = 0;  // of every buffered element
};

}  // namespace dataecho::service
