// Frames: what a worker's stream carries to a trainer (one transport Frame, a list of
// buffers, each). The bytes, joined, are
//   u64 kind, u64 job, u64 epoch, u64 piece, u64 lease, then by kind:
//   kElements:  u64 count, and per element u64 record (its place in the piece) and the
//               element as StateWriter::write_example writes it (the state encoding:
//               ids, echo indices and epochs of its rows, then its named tensors);
//   kPieceDone, kYield: u64 records;
//   kError:     u64 length and the message.
// FrameWriter puts the small fields in one header buffer and sends each tensor's bytes as
// a slice of the tensor's own Buffer: nothing is copied on send. FrameReader reads the
// integers across the received buffers (a transport may cut a frame anywhere) and makes
// each tensor a view of the received buffer that holds all of its bytes, aligned for its
// dtype, or else copies it once. A damaged or truncated frame is refused with an error
// naming the peer, what is wrong and at which byte, never read past its end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataecho/core/example.h"
#include "service/transport.h"

namespace dataecho::service {

enum class FrameKind : uint64_t { kElements = 1, kPieceDone = 2, kYield = 3, kError = 4 };

struct FrameHeader {
  FrameKind kind = FrameKind::kElements;
  int64_t job = 0;
  int64_t epoch = 0;
  int64_t piece = 0;
  int64_t lease = 0;
};

struct FrameElement {
  int64_t record = 0;
  Example example;
};

// A decoded frame.
struct FrameContent {
  FrameHeader header;
  std::vector<FrameElement> elements;  // kElements
  int64_t records = 0;                 // kPieceDone, kYield
  std::string message;                 // kError
};

// Tensors of fewer bytes than this travel in the header and are copied on receipt (a view
// would pin a whole received buffer for a few bytes).
inline constexpr size_t kFrameSliceMinBytes = 64;

// Builds a kElements frame.
class FrameWriter {
 public:
  // `header.kind` is set to kElements.
  explicit FrameWriter(const FrameHeader& header);
  void add(int64_t record, const Example& example);
  size_t count() const { return count_; }
  // The frame's bytes so far (header and slices).
  size_t bytes() const { return header_.size() + slice_bytes_; }
  // The frame; the writer is empty afterwards.
  Frame finish();

 private:
  struct Part {
    size_t header_end = 0;  // the header's bytes up to here come before `slice`
    std::shared_ptr<const Buffer> buffer;
    size_t offset = 0;
    size_t size = 0;
  };
  void put_u64(uint64_t v);
  void put_string(std::string_view s);
  void put_tensor(const Tensor& t);

  std::string header_;
  std::vector<Part> parts_;
  size_t count_ = 0;
  size_t slice_bytes_ = 0;
};

// The frames without elements.
Frame piece_done_frame(FrameHeader header, int64_t records);
Frame yield_frame(FrameHeader header, int64_t records);
Frame error_frame(FrameHeader header, const std::string& message);

// What a FrameReader has received so far.
struct FrameCounters {
  uint64_t frames = 0;
  uint64_t received_bytes = 0;  // every byte of every frame
  uint64_t view_bytes = 0;      // tensor bytes viewed in place
  uint64_t copied_bytes = 0;    // tensor bytes copied (cut by the transport, misaligned, small)
};

// Decodes the frames of one peer. Not thread-safe: one reader per stream.
class FrameReader {
 public:
  // `peer` names the sender in errors ("worker w3 (10.0.0.5:41071)").
  explicit FrameReader(std::string peer) : peer_(std::move(peer)) {}
  // Throws Error (kDataLoss) naming the peer, what is wrong and the byte where it is.
  FrameContent read(const Frame& frame);
  const FrameCounters& counters() const { return counters_; }

 private:
  std::string peer_;
  FrameCounters counters_;
};

}  // namespace dataecho::service
