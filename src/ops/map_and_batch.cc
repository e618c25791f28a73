#include "map_and_batch.h"

namespace dataecho {

bool RowPlacer::slot_at(int64_t b, int64_t row, OutputSlot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_column_ || b < 0 || row < 0 || row >= size_) return false;
  slot->dtype = dtype_;
  slot->shape = shape_;
  slot->buffer = buffer_locked(b);
  slot->offset = static_cast<size_t>(row) * row_bytes_;
  slot->taken = false;
  return true;
}

bool RowPlacer::has_column() const {
  std::lock_guard<std::mutex> lock(mu_);
  return has_column_;
}

void RowPlacer::set_column(DType dtype, const Shape& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  if (has_column_) return;
  dtype_ = dtype;
  shape_ = shape;
  row_bytes_ = static_cast<size_t>(shape_elements(shape)) * dtype_size(dtype);
  has_column_ = true;
}

bool RowPlacer::is_column(DType dtype, const Shape& shape) const {
  std::lock_guard<std::mutex> lock(mu_);
  return has_column_ && dtype == dtype_ && shape == shape_;
}

std::shared_ptr<Buffer> RowPlacer::buffer_locked(int64_t b) {
  auto& buf = buffers_[b];
  if (!buf) buf = Buffer::allocate(row_bytes_ * static_cast<size_t>(size_));
  return buf;
}

std::shared_ptr<Buffer> RowPlacer::batch_buffer(int64_t b) {
  std::lock_guard<std::mutex> lock(mu_);
  return buffer_locked(b);
}

bool RowPlacer::holds(const Buffer* buffer) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [b, buf] : buffers_)
    if (buf.get() == buffer) return true;
  return false;
}

void RowPlacer::finish_batch(int64_t b) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.erase(b);
}

void RowPlacer::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.clear();
}

}  // namespace dataecho
