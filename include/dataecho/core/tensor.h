// Tensor: a dtype, a shape and an immutable, shared byte buffer.
// Thread-safety: a Tensor is a value; copies share the buffer, which nobody writes
// once a Tensor holds it, so concurrent reads from any number of threads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dataecho/core/error.h"

namespace dataecho {

enum class DType : uint8_t { kUInt8, kInt32, kInt64, kFloat32, kFloat64 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, uint8_t>)
    return DType::kUInt8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::kInt64;
  else if constexpr (std::is_same_v<T, float>)
    return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::kFloat64;
  else
    static_assert(sizeof(T) == 0, "unsupported tensor element type");
}

using Shape = std::vector<int64_t>;
std::string shape_to_string(const Shape& shape);  // "[2, 28, 28]"
int64_t shape_elements(const Shape& shape);       // 1 for a scalar

// A contiguous block of bytes. Written only by whoever allocated it, before it is
// handed to a Tensor; read-only afterwards. allocate() gives 64-byte aligned memory.
class Buffer {
  struct Key {
    explicit Key() = default;
  };

 public:
  static std::shared_ptr<Buffer> allocate(size_t nbytes);
  // Adopts memory owned elsewhere (an mmapped file, a decoder's output, a record inside
  // the chunk a reader read): `release` runs when the last tensor that shares it goes
  // away. No copy, any alignment. `footprint`: the bytes that stay allocated while this
  // buffer lives, when more than nbytes (the whole chunk a record lies in).
  static std::shared_ptr<Buffer> wrap(std::byte* data, size_t nbytes, std::function<void()> release,
                                      size_t footprint = 0);

  // Only allocate() and wrap() make buffers (Key is private); the constructor is public
  // so that std::make_shared can put the buffer and its count in one allocation.
  explicit Buffer(Key) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  const std::byte* data() const { return data_; }
  std::byte* mutable_data() { return data_; }
  size_t size() const { return size_; }
  // The bytes this buffer keeps allocated: at least its size.
  size_t footprint() const { return footprint_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t footprint_ = 0;
  std::function<void()> release_;
};

// A place prepared for one tensor: while a ScopedOutputSlot holds it on a thread, the
// first Tensor::make of exactly this dtype and shape on that thread writes into
// `buffer` at `offset` instead of a fresh buffer, and sets `taken`. Map-and-batch fusion
// uses it so that a map function's output is computed straight into its batch row
// (RowPlacer in src/ops/map_and_batch.h). Whoever fills the slot must own those bytes.
struct OutputSlot {
  DType dtype = DType::kUInt8;
  Shape shape;
  std::shared_ptr<Buffer> buffer;
  size_t offset = 0;
  bool taken = false;
};
class ScopedOutputSlot {
 public:
  explicit ScopedOutputSlot(OutputSlot* slot);  // null: none
  ~ScopedOutputSlot();
  ScopedOutputSlot(const ScopedOutputSlot&) = delete;
  ScopedOutputSlot& operator=(const ScopedOutputSlot&) = delete;

 private:
  OutputSlot* previous_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no dtype, no data
  // A view of `buffer` starting at `offset`; the buffer must hold the whole tensor.
  Tensor(DType dtype, Shape shape, std::shared_ptr<const Buffer> buffer, size_t offset = 0);

  template <class T>
  static Tensor scalar(T value) {
    Tensor t;
    t.dtype_ = dtype_of<T>();
    t.defined_ = true;
    std::memcpy(t.inline_, &value, sizeof(T));
    return t;
  }
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    return from_data(dtype_of<T>(), std::move(shape), values.data(), values.size() * sizeof(T));
  }
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }
  // Copies `nbytes` bytes from `data`; nbytes must equal the size the shape implies.
  static Tensor from_data(DType dtype, Shape shape, const void* data, size_t nbytes);
  // A uint8 tensor of shape [n] holding the bytes.
  static Tensor from_bytes(std::string_view bytes);
  // An uninitialized tensor's buffer to fill before wrapping: `fill` gets the bytes
  // (those of the thread's OutputSlot when it matches; see there). `skew`: a tensor
  // given a buffer of its own starts that many bytes past the buffer's 64-byte aligned
  // start (decode_jpeg uses it to keep libjpeg-turbo from writing with non-temporal
  // stores); an OutputSlot is filled where it is.
  static Tensor make(DType dtype, Shape shape, const std::function<void(std::byte*)>& fill,
                     size_t skew = 0);

  bool defined() const { return defined_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t num_elements() const { return shape_elements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(num_elements()) * dtype_size(dtype_); }

  const std::byte* raw_data() const {
    return buffer_ ? buffer_->data() + offset_ : reinterpret_cast<const std::byte*>(inline_);
  }
  template <class T>
  const T* data() const {
    check_dtype(dtype_of<T>());
    return reinterpret_cast<const T*>(raw_data());
  }
  // The single value of a one-element tensor.
  template <class T>
  T item() const {
    check_dtype(dtype_of<T>());
    if (num_elements() != 1)
      throw_error(ErrorCode::kInvalidArgument, "tensor",
                  "item() of a tensor of shape " + shape_to_string(shape_));
    T v;
    std::memcpy(&v, raw_data(), sizeof(T));
    return v;
  }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(raw_data()), nbytes()}; }

  // The buffer behind the data; null for small tensors stored inline (scalars).
  const std::shared_ptr<const Buffer>& buffer() const { return buffer_; }
  size_t offset() const { return offset_; }
  bool shares_buffer_with(const Tensor& other) const {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }
  // Same dtype, shape and bytes.
  bool equals(const Tensor& other) const;

  // A tensor with the same bytes viewed under another shape of equal element count.
  Tensor reshaped(Shape shape) const;
  // Whether this tensor keeps alive much more memory than its own bytes (a record that
  // views its read chunk, a row of a batch): more than twice its size plus 4 KiB.
  bool pins_more_than_itself() const;
  // This tensor with its bytes in a buffer of its own when pins_more_than_itself(),
  // else itself (no copy).
  Tensor compacted() const;

 private:
  void check_dtype(DType expected) const;

  DType dtype_ = DType::kUInt8;
  bool defined_ = false;
  Shape shape_;
  std::shared_ptr<const Buffer> buffer_;
  size_t offset_ = 0;
  alignas(8) unsigned char inline_[8] = {};
};

}  // namespace dataecho
