// Iterator state as bytes: what save() writes and restore() reads, in the same order.
// Not thread-safe: one writer or reader per save/restore call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dataecho/core/example.h"
#include "dataecho/core/rng.h"

namespace dataecho {

class StateWriter {
 public:
  // A tag before each node's state, so a restore against another pipeline fails clearly.
  void begin(std::string_view tag) { write_string(tag); }
  void write_u64(uint64_t v);
  void write_i64(int64_t v) { write_u64(static_cast<uint64_t>(v)); }
  void write_f64(double v);
  void write_bool(bool v) { write_u64(v ? 1 : 0); }
  void write_string(std::string_view s);
  void write_tensor(const Tensor& t);
  void write_example(const Example& e);
  void write_rng(const Rng& rng);

  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view data) : data_(data) {}
  // Reads bytes of `buffer`; tensors read from it are views of the buffer (no copy)
  // where their data are aligned for their type, copies where not. A cache file's
  // records, read in chunks, become their elements this way.
  // Reads `size` bytes of `buffer` from `offset`.
  StateReader(std::shared_ptr<const Buffer> buffer, size_t offset, size_t size)
      : data_(reinterpret_cast<const char*>(buffer->data()) + offset, size),
        backing_(std::move(buffer)) {}
  // Reads a tag and checks it: "state: expected the state of 'shuffle', found 'batch'".
  void expect(std::string_view tag);
  uint64_t read_u64();
  int64_t read_i64() { return static_cast<int64_t>(read_u64()); }
  double read_f64();
  bool read_bool() { return read_u64() != 0; }
  std::string read_string();
  Tensor read_tensor();
  Example read_example();
  void read_rng(Rng& rng);
  bool at_end() const { return pos_ == data_.size(); }

 private:
  std::string_view take(size_t n);
  std::string_view data_;
  size_t pos_ = 0;
  std::shared_ptr<const Buffer> backing_;
};

}  // namespace dataecho
