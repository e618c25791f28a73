#include "dataecho/core/state.h"

#include <cstring>

#include "dataecho/core/row_codec.h"

namespace dataecho {

void StateWriter::write_u64(uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out_.append(b, 8);
}

void StateWriter::write_f64(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  write_u64(u);
}

void StateWriter::write_string(std::string_view s) {
  write_u64(s.size());
  out_.append(s.data(), s.size());
}

void StateWriter::write_tensor(const Tensor& t) {
  write_bool(t.defined());
  if (!t.defined()) return;
  write_u64(static_cast<uint64_t>(t.dtype()));
  write_u64(t.rank());
  for (int64_t d : t.shape()) write_i64(d);
  write_string(t.bytes());
}

void StateWriter::write_example(const Example& e) {
  write_bool(e.is_batch());
  auto rows = e.rows();
  write_u64(rows.size());
  for (const auto& r : rows) {
    write_i64(r.id);
    write_u64(pack_echo_epoch(r));
  }
  write_u64(e.fields().size());
  for (const auto& [name, t] : e.fields()) {
    write_string(name);
    write_tensor(t);
  }
}

void StateWriter::write_rng(const Rng& rng) {
  for (uint64_t s : rng.state()) write_u64(s);
}

std::string_view StateReader::take(size_t n) {
  if (n > data_.size() - pos_) {
    throw_error(ErrorCode::kDataLoss, "state", "saved state is truncated",
                "needed " + std::to_string(n) + " bytes at byte " + std::to_string(pos_) + " of " +
                    std::to_string(data_.size()));
  }
  auto s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

uint64_t StateReader::read_u64() {
  auto b = take(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
  return v;
}

double StateReader::read_f64() {
  uint64_t u = read_u64();
  double v;
  std::memcpy(&v, &u, 8);
  return v;
}

std::string StateReader::read_string() {
  uint64_t n = read_u64();
  return std::string(take(n));
}

void StateReader::expect(std::string_view tag) {
  size_t at = pos_;
  std::string got = read_string();
  if (got != tag) {
    throw_error(ErrorCode::kInvalidArgument, "state",
                "expected the state of '" + std::string(tag) + "', found '" + got +
                    "': the state was saved from a different pipeline",
                "byte " + std::to_string(at));
  }
}

Tensor StateReader::read_tensor() {
  if (!read_bool()) return Tensor();
  uint64_t dt = read_u64();
  if (dt > static_cast<uint64_t>(DType::kFloat64))
    throw_error(ErrorCode::kDataLoss, "state", "bad dtype in saved state");
  uint64_t rank = read_u64();
  if (rank > 64) throw_error(ErrorCode::kDataLoss, "state", "bad tensor rank in saved state");
  Shape shape(rank);
  for (auto& d : shape) d = read_i64();
  const std::string_view bytes = take(read_u64());
  const auto dtype = static_cast<DType>(dt);
  const size_t at =
      backing_ ? static_cast<size_t>(bytes.data() - reinterpret_cast<const char*>(backing_->data()))
               : 0;
  if (backing_ && at % dtype_size(dtype) == 0 &&
      bytes.size() == static_cast<size_t>(shape_elements(shape)) * dtype_size(dtype))
    return Tensor(dtype, std::move(shape), backing_, at);
  return Tensor::from_data(dtype, std::move(shape), bytes.data(), bytes.size());
}

Example StateReader::read_example() {
  Example e;
  bool batch = read_bool();
  uint64_t n = read_u64();
  // Each row takes 16 bytes: a count past what is left is a cut or damaged state (and is
  // not allocated).
  if (n > (data_.size() - pos_) / 16)
    throw_error(ErrorCode::kDataLoss, "state",
                "saved state is truncated or corrupt: an element of " + std::to_string(n) +
                    " rows where " + std::to_string(data_.size() - pos_) + " bytes are left");
  std::vector<RowMeta> rows(n);
  for (auto& r : rows) {
    r.id = read_i64();
    unpack_echo_epoch(read_u64(), r);
  }
  set_rows_read(e, batch, std::move(rows));
  uint64_t nf = read_u64();
  for (uint64_t i = 0; i < nf; ++i) {
    std::string name = read_string();
    e.set(name, read_tensor());
  }
  return e;
}

void StateReader::read_rng(Rng& rng) {
  std::array<uint64_t, 4> s;
  for (auto& x : s) x = read_u64();
  rng.set_state(s);
}

}  // namespace dataecho
