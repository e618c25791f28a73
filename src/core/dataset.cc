#include "dataecho/core/dataset.h"

#include <exception>

#include "dataecho/core/clock.h"
#include "dataecho/core/memory_watch.h"

namespace dataecho {

std::optional<Example> Iterator::next() {
  if (stats_ == nullptr) return next_impl();
  // A node with threads of its own is timed on every call: its next() is fast while its
  // buffer has elements and blocks when it runs dry, and that happens periodically (a
  // map's buffer refills in bursts), so a fixed sampling stride could land in phase or
  // out of phase with the blocking and bias the estimate; the node above it would then
  // be charged its child's waiting (de.profile named a fused batch as the slowest stage).
  const bool timed = untimed_left_ == 0 || stats_->async;
  const int64_t t0 = timed ? now_ns() : 0;
  if (!timed) --untimed_left_;
  // The call in progress, for a window that ends before it returns (NodeStats::next_ns_at):
  // one consumer's, where several call at once.
  int64_t none = 0;
  const bool stamped = timed && stats_->next_since_ns.compare_exchange_strong(none, t0);
  auto account = [&] {
    if (!timed) return;
    int64_t dt = now_ns() - t0;
    if (stamped) stats_->next_since_ns.store(0);  // before next_ns: next_ns_at's order
    stats_->next_ns.fetch_add(dt * stride_);
    stride_ = dt >= kTimeEveryCallNs || stats_->async ? 1 : kSampleStride;
    untimed_left_ = stride_ - 1;
  };
  std::optional<Example> out;
  try {
    out = next_impl();
  } catch (const Error&) {
    account();
    throw;
  } catch (const std::exception& e) {
    account();
    throw Error(ErrorCode::kInternal, label(), e.what());
  }
  account();
  if (out) {
    const int64_t n = stats_->elements.fetch_add(1, std::memory_order_relaxed) + 1;
    stats_->rows.fetch_add(static_cast<int64_t>(out->num_rows()), std::memory_order_relaxed);
    const auto bytes = static_cast<int64_t>(out->nbytes());
    const int64_t total = stats_->bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (!stats_->watches.empty() && (n & (n - 1)) == 0)
      for (const auto& w : stats_->watches) w->observe(n, total);
  }
  return out;
}

std::unique_ptr<Iterator> Dataset::make_iterator(const IteratorContext& ctx) const {
  auto it = make_iterator_impl(ctx);
  it->stats_ = counts_elements() ? stats_.get() : nullptr;
  it->label_ = &label_;
  it->dataset_ = weak_from_this().lock();
  return it;
}

void Dataset::attach(std::string label, std::shared_ptr<NodeStats> stats) {
  label_ = std::move(label);
  stats_ = std::move(stats);
}

std::string Dataset::not_seekable_reason() const {
  return "'" + op_name() + "' is not a source whose records can be located";
}

std::vector<ShardIndex> Dataset::record_index() const {
  throw_error(ErrorCode::kInvalidArgument, label(), not_seekable_reason());
}

std::shared_ptr<const Dataset> Dataset::record_range(const RecordRange&) const {
  throw_error(ErrorCode::kInvalidArgument, label(), not_seekable_reason());
}

void check_record_range(const std::string& label, const RecordRange& r, int64_t shards,
                        int64_t records, const std::string& input) {
  const std::string what = "records [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                           ") of shard " + std::to_string(r.shard);
  if (shards >= 0 && (r.shard < 0 || r.shard >= shards))
    throw_error(ErrorCode::kInvalidArgument, label,
                what + " of a source of " + std::to_string(shards) +
                    (shards == 1 ? " shard" : " shards") + ": there is no such shard",
                input);
  if (r.begin < 0 || r.begin > r.end)
    throw_error(ErrorCode::kInvalidArgument, label,
                what + ": not a range (it needs 0 <= begin <= end)", input);
  if (records >= 0 && r.end > records)
    throw_error(ErrorCode::kInvalidArgument, label,
                what + ": it has " + std::to_string(records) + " records", input);
}

}  // namespace dataecho
