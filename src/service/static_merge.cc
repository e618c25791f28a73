#include "service/static_merge.h"

#include <utility>

namespace dataecho::service {

void StaticMerge::start(std::vector<int64_t> order, const std::function<bool(int64_t)>& done,
                        const std::function<int64_t(int64_t)>& kept) {
  order_ = std::move(order);
  cursor_ = 0;
  while (cursor_ < order_.size() && done(order_[cursor_])) ++cursor_;
  returned_ = cursor_ < order_.size() ? kept(order_[cursor_]) : 0;
  buffered_.clear();
  bytes_ = 0;
  started_ = true;
}

bool StaticMerge::admits(int64_t piece, size_t bytes, size_t limit) const {
  if (cursor_ < order_.size() && piece == order_[cursor_]) {
    const auto it = buffered_.find(piece);
    return it == buffered_.end() || it->second.empty() || bytes_ + bytes <= limit;
  }
  return bytes_ + bytes <= limit / 2;
}

void StaticMerge::add(int64_t piece, int64_t record, Example e, size_t bytes) {
  buffered_[piece].push_back({std::move(e), record, bytes});
  bytes_ += bytes;
}

StaticMerge::Take StaticMerge::take(const std::function<bool(int64_t)>& done, Example& out) {
  for (; cursor_ < order_.size(); ++cursor_, returned_ = 0) {
    const int64_t piece = order_[cursor_];
    const auto it = buffered_.find(piece);
    if (it != buffered_.end() && !it->second.empty()) {
      Item& item = it->second.front();
      out = std::move(item.example);
      returned_ = item.record + 1;
      bytes_ -= item.bytes;
      it->second.pop_front();
      return Take::kElement;
    }
    if (!done(piece)) return Take::kWait;
    if (it != buffered_.end()) buffered_.erase(it);
  }
  return Take::kEnd;
}

nlohmann::json StaticMerge::lane_state() const {
  nlohmann::json records = nlohmann::json::object(), done = nlohmann::json::array();
  for (size_t i = 0; i < cursor_ && i < order_.size(); ++i) done.push_back(order_[i]);
  if (cursor_ < order_.size() && returned_ > 0)
    records[std::to_string(order_[cursor_])] = returned_;
  return {{"piece_records", records}, {"done_pieces", done}};
}

}  // namespace dataecho::service
