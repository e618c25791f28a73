#include "service/frame.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "dataecho/core/row_codec.h"

namespace dataecho::service {
namespace {

constexpr uint64_t kMaxRank = 64;  // as the state encoding allows

// A view of bytes [offset, offset + size) of `buffer` that keeps `buffer` alive.
std::shared_ptr<const Buffer> slice_of(const std::shared_ptr<const Buffer>& buffer, size_t offset,
                                       size_t size) {
  if (offset == 0 && size == buffer->size()) return buffer;
  auto* data = const_cast<std::byte*>(buffer->data()) + offset;
  return Buffer::wrap(
      data, size, [keep = buffer] {}, buffer->footprint());
}

void put_u64_into(std::string& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out.append(b, 8);
}

std::string header_bytes(const FrameHeader& h) {
  std::string out;
  put_u64_into(out, static_cast<uint64_t>(h.kind));
  for (int64_t v : {h.job, h.epoch, h.piece, h.lease}) put_u64_into(out, static_cast<uint64_t>(v));
  return out;
}

Frame frame_of(std::string bytes) {
  auto buffer = Buffer::allocate(bytes.size());
  std::memcpy(buffer->mutable_data(), bytes.data(), bytes.size());
  return Frame{std::move(buffer)};
}

// Reads a received frame's bytes in order across its buffers; every read is checked
// against what is left, and a failure names the peer, the place and the byte.
class Cursor {
 public:
  Cursor(const Frame& frame, const std::string& peer, FrameCounters& counters)
      : frame_(frame), peer_(peer), counters_(counters) {
    for (const auto& b : frame) total_ += b->size();
  }
  uint64_t left() const { return total_ - pos_; }
  uint64_t pos() const { return pos_; }
  uint64_t total() const { return total_; }
  void set_place(std::string place) { place_ = std::move(place); }
  const std::string& place() const { return place_; }

  [[noreturn]] void fail(const std::string& what, uint64_t at) const {
    throw_error(ErrorCode::kDataLoss, "service",
                "frame from " + peer_ + ": " + what + (place_.empty() ? "" : " in " + place_) +
                    " at byte " + std::to_string(at) + " of " + std::to_string(total_));
  }
  void need(uint64_t n, const char* what) const {
    if (n > left())
      fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes, " +
               std::to_string(left()) + " are left",
           pos_);
  }
  uint64_t u64(const char* what) {
    need(8, what);
    unsigned char b[8];
    copy_out(reinterpret_cast<std::byte*>(b), 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
    return v;
  }
  bool flag(const char* what) {
    const uint64_t at = pos_;
    const uint64_t v = u64(what);
    if (v > 1) fail(std::string("bad ") + what + " " + std::to_string(v) + " (not 0 or 1)", at);
    return v == 1;
  }
  std::string string(const char* what) {
    const uint64_t n = u64(what);
    need(n, what);
    std::string s(n, '\0');
    copy_out(reinterpret_cast<std::byte*>(s.data()), n);
    return s;
  }
  Tensor tensor(DType dtype, Shape shape, size_t nbytes);

 private:
  // Copies `n` bytes (checked by the caller) and moves past them.
  void copy_out(std::byte* out, size_t n) {
    while (n > 0) {
      const auto& b = *frame_[index_];
      const size_t k = std::min(n, b.size() - offset_);
      if (k > 0) std::memcpy(out, b.data() + offset_, k);
      out += k, n -= k;
      advance(k);
    }
  }
  void advance(size_t k) {
    offset_ += k, pos_ += k;
    while (index_ < frame_.size() && offset_ == frame_[index_]->size()) ++index_, offset_ = 0;
  }

  const Frame& frame_;
  const std::string& peer_;
  FrameCounters& counters_;
  size_t index_ = 0;   // the buffer the next byte is in
  size_t offset_ = 0;  // and its place there
  uint64_t pos_ = 0;
  uint64_t total_ = 0;
  std::string place_;
};

Tensor Cursor::tensor(DType dtype, Shape shape, size_t nbytes) {
  need(nbytes, "tensor data");
  if (nbytes >= kFrameSliceMinBytes) {
    while (offset_ == frame_[index_]->size()) ++index_, offset_ = 0;  // skip empty buffers
    const auto& b = frame_[index_];
    const auto address = reinterpret_cast<uintptr_t>(b->data() + offset_);
    if (b->size() - offset_ >= nbytes && address % dtype_size(dtype) == 0) {
      Tensor t(dtype, std::move(shape), b, offset_);
      counters_.view_bytes += nbytes;
      advance(nbytes);
      return t;
    }
  }
  counters_.copied_bytes += nbytes;
  return Tensor::make(dtype, std::move(shape), [&](std::byte* out) { copy_out(out, nbytes); });
}

Shape read_shape(Cursor& c, DType dtype, uint64_t& nbytes) {
  const uint64_t at = c.pos();
  const uint64_t rank = c.u64("tensor rank");
  if (rank > kMaxRank) c.fail("bad tensor rank " + std::to_string(rank), at);
  c.need(rank * 8, "tensor shape");
  Shape shape(rank);
  // `bound`, the product of the dimensions other than 0, keeps every partial product of
  // shape_elements() within int64_t, whatever the order of the dimensions.
  uint64_t elements = 1;
  int64_t bound = 1;
  for (auto& d : shape) {
    const uint64_t dim_at = c.pos();
    d = static_cast<int64_t>(c.u64("tensor dimension"));
    if (d < 0) c.fail("negative tensor dimension " + std::to_string(d), dim_at);
    if (__builtin_mul_overflow(bound, std::max<int64_t>(d, 1), &bound))
      c.fail("tensor shape too large", dim_at);
    elements *= static_cast<uint64_t>(d);
  }
  if (__builtin_mul_overflow(elements, dtype_size(dtype), &nbytes))
    c.fail("tensor shape too large", at);
  return shape;
}

Tensor read_tensor(Cursor& c) {
  if (!c.flag("tensor flag")) return Tensor();
  uint64_t at = c.pos();
  const uint64_t dt = c.u64("tensor dtype");
  if (dt > static_cast<uint64_t>(DType::kFloat64)) c.fail("bad dtype " + std::to_string(dt), at);
  const auto dtype = static_cast<DType>(dt);
  uint64_t expected = 0;
  Shape shape = read_shape(c, dtype, expected);
  at = c.pos();
  const uint64_t nbytes = c.u64("tensor length");
  if (nbytes != expected)
    c.fail("tensor of " + std::to_string(nbytes) + " bytes where its shape " +
               shape_to_string(shape) + " of " + dtype_name(dtype) + " needs " +
               std::to_string(expected),
           at);
  return c.tensor(dtype, std::move(shape), nbytes);
}

// One element as StateReader::read_example reads it, with every count bounded by the
// bytes left before anything is allocated.
Example read_element(Cursor& c, const std::string& place) {
  Example e;
  const bool batch = c.flag("batch flag");
  uint64_t at = c.pos();
  const uint64_t n = c.u64("row count");
  if (n > c.left() / 16) c.fail("truncated: " + std::to_string(n) + " rows do not fit", at);
  std::vector<RowMeta> rows(n);
  for (auto& r : rows) {
    r.id = static_cast<int64_t>(c.u64("row id"));
    unpack_echo_epoch(c.u64("row echo"), r);
  }
  set_rows_read(e, batch, std::move(rows));
  at = c.pos();
  const uint64_t fields = c.u64("field count");
  if (fields > c.left() / 16)
    c.fail("truncated: " + std::to_string(fields) + " fields do not fit", at);
  for (uint64_t i = 0; i < fields; ++i) {
    c.set_place(place + ", field " + std::to_string(i));
    std::string name = c.string("field name");
    c.set_place(place + ", field '" + name + "'");
    e.set(name, read_tensor(c));
  }
  return e;
}

void read_elements(Cursor& c, FrameContent& out) {
  const uint64_t at = c.pos();
  const uint64_t count = c.u64("element count");
  // An element takes at least 32 bytes: its record, batch flag, row and field counts.
  if (count > c.left() / 32)
    c.fail("truncated: " + std::to_string(count) + " elements do not fit", at);
  out.elements.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    std::string place = "element " + std::to_string(i);
    c.set_place(place);
    FrameElement element;
    element.record = static_cast<int64_t>(c.u64("record"));
    place += " (record " + std::to_string(element.record) + ")";
    c.set_place(place);
    element.example = read_element(c, place);
    out.elements.push_back(std::move(element));
  }
}

}  // namespace

FrameWriter::FrameWriter(const FrameHeader& header) {
  FrameHeader h = header;
  h.kind = FrameKind::kElements;
  header_ = header_bytes(h);
  put_u64(0);  // the count, set by finish()
}

void FrameWriter::put_u64(uint64_t v) { put_u64_into(header_, v); }

void FrameWriter::put_string(std::string_view s) {
  put_u64(s.size());
  header_.append(s.data(), s.size());
}

// As StateWriter::write_tensor, the bytes of a tensor with a buffer as a slice of it.
void FrameWriter::put_tensor(const Tensor& t) {
  put_u64(t.defined() ? 1 : 0);
  if (!t.defined()) return;
  put_u64(static_cast<uint64_t>(t.dtype()));
  put_u64(t.rank());
  for (int64_t d : t.shape()) put_u64(static_cast<uint64_t>(d));
  const size_t n = t.nbytes();
  put_u64(n);
  if (n < kFrameSliceMinBytes || !t.buffer()) {
    header_.append(t.bytes());
    return;
  }
  parts_.push_back({header_.size(), t.buffer(), t.offset(), n});
  slice_bytes_ += n;
}

// As StateWriter::write_example.
void FrameWriter::add(int64_t record, const Example& e) {
  put_u64(static_cast<uint64_t>(record));
  put_u64(e.is_batch() ? 1 : 0);
  const auto rows = e.rows();
  put_u64(rows.size());
  for (const auto& r : rows) {
    put_u64(static_cast<uint64_t>(r.id));
    put_u64(pack_echo_epoch(r));
  }
  put_u64(e.fields().size());
  for (const auto& [name, t] : e.fields()) {
    put_string(name);
    put_tensor(t);
  }
  ++count_;
}

Frame FrameWriter::finish() {
  std::string count;
  put_u64_into(count, count_);
  header_.replace(40, 8, count);
  auto header = Buffer::allocate(header_.size());
  std::memcpy(header->mutable_data(), header_.data(), header_.size());
  const std::shared_ptr<const Buffer> h = std::move(header);
  Frame frame;
  size_t from = 0;
  for (const auto& p : parts_) {
    if (p.header_end > from) frame.push_back(slice_of(h, from, p.header_end - from));
    frame.push_back(slice_of(p.buffer, p.offset, p.size));
    from = p.header_end;
  }
  if (h->size() > from) frame.push_back(slice_of(h, from, h->size() - from));
  header_.resize(40);
  put_u64(0);
  parts_.clear();
  count_ = 0;
  slice_bytes_ = 0;
  return frame;
}

Frame piece_done_frame(FrameHeader header, int64_t records) {
  header.kind = FrameKind::kPieceDone;
  std::string bytes = header_bytes(header);
  put_u64_into(bytes, static_cast<uint64_t>(records));
  return frame_of(std::move(bytes));
}

Frame yield_frame(FrameHeader header, int64_t records) {
  header.kind = FrameKind::kYield;
  std::string bytes = header_bytes(header);
  put_u64_into(bytes, static_cast<uint64_t>(records));
  return frame_of(std::move(bytes));
}

Frame error_frame(FrameHeader header, const std::string& message) {
  header.kind = FrameKind::kError;
  std::string bytes = header_bytes(header);
  put_u64_into(bytes, message.size());
  bytes += message;
  return frame_of(std::move(bytes));
}

FrameContent FrameReader::read(const Frame& frame) {
  Cursor c(frame, peer_, counters_);
  ++counters_.frames;
  counters_.received_bytes += c.total();
  FrameContent out;
  uint64_t at = c.pos();
  const uint64_t kind = c.u64("frame kind");
  if (kind < 1 || kind > 4) c.fail("unknown frame kind " + std::to_string(kind), at);
  out.header.kind = static_cast<FrameKind>(kind);
  out.header.job = static_cast<int64_t>(c.u64("job"));
  out.header.epoch = static_cast<int64_t>(c.u64("epoch"));
  out.header.piece = static_cast<int64_t>(c.u64("piece"));
  out.header.lease = static_cast<int64_t>(c.u64("lease"));
  if (out.header.kind == FrameKind::kElements)
    read_elements(c, out);
  else if (out.header.kind == FrameKind::kError)
    out.message = c.string("error message");
  else
    out.records = static_cast<int64_t>(c.u64("records"));
  c.set_place("");
  if (c.left() > 0) c.fail(std::to_string(c.left()) + " bytes after the frame's end", c.pos());
  return out;
}

}  // namespace dataecho::service
