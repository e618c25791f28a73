#include "dataecho/dataset.h"

#include <exception>

#include "dataecho/core/clock.h"

namespace dataecho {

std::optional<Example> Iterator::next() {
  if (stats_ == nullptr) return next_impl();
  int64_t t0 = now_ns();
  std::optional<Example> out;
  try {
    out = next_impl();
  } catch (const Error&) {
    stats_->next_ns += now_ns() - t0;
    throw;
  } catch (const std::exception& e) {
    stats_->next_ns += now_ns() - t0;
    throw Error(ErrorCode::kInternal, label(), e.what());
  }
  stats_->next_ns += now_ns() - t0;
  if (out) {
    stats_->elements.fetch_add(1, std::memory_order_relaxed);
    stats_->rows.fetch_add(static_cast<int64_t>(out->num_rows()), std::memory_order_relaxed);
    stats_->bytes.fetch_add(static_cast<int64_t>(out->nbytes()), std::memory_order_relaxed);
  }
  return out;
}

std::unique_ptr<Iterator> Dataset::make_iterator(const IteratorContext& ctx) const {
  auto it = make_iterator_impl(ctx);
  it->stats_ = stats_.get();
  it->label_ = &label_;
  it->dataset_ = weak_from_this().lock();
  return it;
}

void Dataset::attach(std::string label, std::shared_ptr<NodeStats> stats) {
  label_ = std::move(label);
  stats_ = std::move(stats);
}

}  // namespace dataecho
