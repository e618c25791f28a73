#include "dataecho/core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/block_cache.h"

namespace dataecho {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    if (name == dtype_name(d)) return d;
  }
  return std::nullopt;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t shape_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::shared_ptr<Buffer> Buffer::allocate(size_t nbytes) {
  constexpr size_t kAlign = 64;
  size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  auto b = std::make_shared<Buffer>(Key{});
  b->size_ = nbytes;
  if (rounded >= detail::kLargeBlockBytes) {
    size_t mapped = 0;
    void* p = detail::acquire_large_block(rounded, &mapped);
    b->data_ = static_cast<std::byte*>(p);
    b->footprint_ = mapped;
    b->release_ = [p, mapped] { detail::release_large_block(p, mapped); };
    return b;
  }
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) throw std::bad_alloc();
  b->data_ = static_cast<std::byte*>(p);
  b->footprint_ = rounded;
  b->release_ = [p] { std::free(p); };
  return b;
}

std::shared_ptr<Buffer> Buffer::wrap(std::byte* data, size_t nbytes, std::function<void()> release,
                                     size_t footprint) {
  auto b = std::make_shared<Buffer>(Key{});
  b->data_ = data;
  b->size_ = nbytes;
  b->footprint_ = std::max(nbytes, footprint);
  b->release_ = std::move(release);
  return b;
}

Buffer::~Buffer() {
  if (release_) release_();
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<const Buffer> buffer, size_t offset)
    : dtype_(dtype),
      defined_(true),
      shape_(std::move(shape)),
      buffer_(std::move(buffer)),
      offset_(offset) {
  for (int64_t d : shape_) {
    if (d < 0)
      throw_error(ErrorCode::kInvalidArgument, "tensor",
                  "negative dimension in shape " + shape_to_string(shape_));
  }
  if (!buffer_) throw_error(ErrorCode::kInvalidArgument, "tensor", "null buffer");
  if (offset_ + nbytes() > buffer_->size()) {
    throw_error(ErrorCode::kInvalidArgument, "tensor",
                "shape " + shape_to_string(shape_) + " of " + dtype_name(dtype_) + " needs " +
                    std::to_string(nbytes()) + " bytes at offset " + std::to_string(offset_) +
                    " but the buffer holds " + std::to_string(buffer_->size()));
  }
}

namespace {
thread_local OutputSlot* t_output_slot = nullptr;
}  // namespace

ScopedOutputSlot::ScopedOutputSlot(OutputSlot* slot) : previous_(t_output_slot) {
  t_output_slot = slot;
}
ScopedOutputSlot::~ScopedOutputSlot() { t_output_slot = previous_; }

Tensor Tensor::make(DType dtype, Shape shape, const std::function<void(std::byte*)>& fill,
                    size_t skew) {
  if (OutputSlot* slot = t_output_slot;
      slot != nullptr && !slot->taken && slot->dtype == dtype && slot->shape == shape) {
    fill(slot->buffer->mutable_data() + slot->offset);
    slot->taken = true;
    return Tensor(dtype, std::move(shape), slot->buffer, slot->offset);
  }
  size_t nbytes = static_cast<size_t>(shape_elements(shape)) * dtype_size(dtype);
  if (shape.empty() && nbytes <= sizeof(inline_)) {
    Tensor t;
    t.dtype_ = dtype;
    t.defined_ = true;
    fill(reinterpret_cast<std::byte*>(t.inline_));
    return t;
  }
  auto buf = Buffer::allocate(nbytes + skew);
  fill(buf->mutable_data() + skew);
  return Tensor(dtype, std::move(shape), std::move(buf), skew);
}

Tensor Tensor::from_data(DType dtype, Shape shape, const void* data, size_t nbytes) {
  size_t expected = static_cast<size_t>(shape_elements(shape)) * dtype_size(dtype);
  if (expected != nbytes) {
    throw_error(ErrorCode::kInvalidArgument, "tensor",
                "shape " + shape_to_string(shape) + " of " + dtype_name(dtype) + " needs " +
                    std::to_string(expected) + " bytes, got " + std::to_string(nbytes));
  }
  return make(dtype, std::move(shape), [&](std::byte* out) {
    if (nbytes) std::memcpy(out, data, nbytes);
  });
}

Tensor Tensor::from_bytes(std::string_view bytes) {
  return from_data(DType::kUInt8, Shape{static_cast<int64_t>(bytes.size())}, bytes.data(),
                   bytes.size());
}

bool Tensor::equals(const Tensor& other) const {
  if (defined_ != other.defined_) return false;
  if (!defined_) return true;
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  return nbytes() == 0 || std::memcmp(raw_data(), other.raw_data(), nbytes()) == 0;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_elements(shape) != num_elements()) {
    throw_error(ErrorCode::kInvalidArgument, "tensor",
                "cannot reshape " + shape_to_string(shape_) + " to " + shape_to_string(shape));
  }
  if (!buffer_) {
    return from_data(dtype_, std::move(shape), raw_data(), nbytes());
  }
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

bool Tensor::pins_more_than_itself() const {
  return buffer_ != nullptr && buffer_->footprint() > 2 * nbytes() + 4096;
}

Tensor Tensor::compacted() const {
  if (!pins_more_than_itself()) return *this;
  return from_data(dtype_, shape_, raw_data(), nbytes());
}

void Tensor::check_dtype(DType expected) const {
  if (!defined_)
    throw_error(ErrorCode::kInvalidArgument, "tensor", "access to an undefined tensor");
  if (expected != dtype_) {
    throw_error(
        ErrorCode::kInvalidArgument, "tensor",
        std::string("tensor holds ") + dtype_name(dtype_) + ", read as " + dtype_name(expected));
  }
}

}  // namespace dataecho
