// Frames (src/service/frame.h): the state encoding of a batch of elements, tensors sent as
// slices of their own buffers and received as views where a received buffer holds them.
#include "service/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "dataecho/core/state.h"

namespace dataecho::service {
namespace {

constexpr const char* kStream = "/dataecho.service.Worker/Read";

std::string joined(const Frame& frame) {
  std::string s;
  for (const auto& b : frame) s.append(reinterpret_cast<const char*>(b->data()), b->size());
  return s;
}

std::shared_ptr<const Buffer> buffer_of(std::string_view s) {
  auto b = Buffer::allocate(s.size());
  if (!s.empty()) std::memcpy(b->mutable_data(), s.data(), s.size());
  return b;
}

Tensor filled(DType dtype, Shape shape, int salt) {
  const size_t n = static_cast<size_t>(shape_elements(shape)) * dtype_size(dtype);
  return Tensor::make(dtype, std::move(shape), [&](std::byte* out) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 7 + salt) & 0xff);
  });
}

// A crop, a label, a float vector and an empty tensor; id, echo and epoch set.
Example element(int64_t id, int32_t echo) {
  Example e(id);
  e.set_echo(echo);
  e.stamp_epoch(3);
  e.set("image", filled(DType::kUInt8, {24, 24, 3}, static_cast<int>(id)));
  e.set("label", Tensor::scalar<int64_t>(id * 10));
  e.set("weights", filled(DType::kFloat32, {33}, 5));
  e.set("none", filled(DType::kFloat64, {0, 4}, 0));
  return e;
}

void expect_same(const Example& a, const Example& b) {
  ASSERT_EQ(a.is_batch(), b.is_batch());
  EXPECT_EQ(a.rows(), b.rows());
  ASSERT_EQ(a.fields().size(), b.fields().size());
  for (size_t i = 0; i < a.fields().size(); ++i) {
    EXPECT_EQ(a.fields()[i].first, b.fields()[i].first);
    EXPECT_EQ(a.fields()[i].second.defined(), b.fields()[i].second.defined());
    if (a.fields()[i].second.defined()) {
      EXPECT_TRUE(a.fields()[i].second.equals(b.fields()[i].second)) << a.fields()[i].first;
    }
  }
}

const FrameHeader kHeader{FrameKind::kElements, 11, 2, 5, 9};

Frame two_elements() {
  FrameWriter w(kHeader);
  w.add(7, element(100, 0));
  w.add(8, element(101, 2));
  return w.finish();
}

TEST(Frame, BytesAreTheStateEncoding) {
  StateWriter expected;
  for (int64_t v : {1, 11, 2, 5, 9, 2}) expected.write_i64(v);
  expected.write_i64(7);
  expected.write_example(element(100, 0));
  expected.write_i64(8);
  expected.write_example(element(101, 2));
  const Frame frame = two_elements();
  EXPECT_EQ(joined(frame), expected.data());
  // The crops and the float vectors are slices of their own buffers: not in the header.
  EXPECT_GE(frame.size(), 5u);
}

TEST(Frame, TensorsAreSentAsSlicesOfTheirOwnBuffers) {
  const Example e = element(1, 0);
  FrameWriter w(kHeader);
  w.add(0, e);
  const Frame frame = w.finish();
  bool found = false;
  for (const auto& b : frame)
    found = found || b->data() == e.get("image").buffer()->data() + e.get("image").offset();
  EXPECT_TRUE(found) << "the crop's bytes were copied";
}

TEST(Frame, RoundTripsEveryDtypeShapeAndBatches) {
  FrameWriter w(kHeader);
  std::vector<Example> sent;
  const std::vector<Shape> shapes = {{}, {0}, {1}, {3}, {2, 0, 5}, {4, 5, 6}, {17, 3}};
  for (DType dtype :
       {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    Example e(static_cast<int64_t>(sent.size()) << 40);
    e.set_echo(static_cast<int32_t>(sent.size()));
    for (size_t i = 0; i < shapes.size(); ++i)
      e.set(std::string(1, 't').append(std::to_string(i)),
            filled(dtype, shapes[i], static_cast<int>(i)));
    e.set("undefined", Tensor());
    sent.push_back(e);
  }
  Example batch;
  batch.set_rows({{-5, 1, 2}, {6, 0, 2}, {1LL << 62, 7, 3}});
  batch.set("image", filled(DType::kUInt8, {3, 8, 8, 3}, 1));
  sent.push_back(batch);
  sent.push_back(Example(42));  // no fields
  for (size_t i = 0; i < sent.size(); ++i) w.add(static_cast<int64_t>(i) * 3, sent[i]);
  FrameReader reader("worker w1");
  const FrameContent got = reader.read(w.finish());
  EXPECT_EQ(got.header.kind, FrameKind::kElements);
  EXPECT_EQ(got.header.job, 11);
  EXPECT_EQ(got.header.lease, 9);
  ASSERT_EQ(got.elements.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got.elements[i].record, static_cast<int64_t>(i) * 3);
    expect_same(got.elements[i].example, sent[i]);
  }
}

TEST(Frame, FramesWithoutElementsRoundTrip) {
  FrameReader reader("worker w1");
  const FrameContent done = reader.read(piece_done_frame(kHeader, 2000));
  EXPECT_EQ(done.header.kind, FrameKind::kPieceDone);
  EXPECT_EQ(done.records, 2000);
  EXPECT_EQ(done.header.piece, 5);
  EXPECT_EQ(reader.read(yield_frame(kHeader, 17)).records, 17);
  const FrameContent error = reader.read(error_frame(kHeader, "cannot build the upstream"));
  EXPECT_EQ(error.header.kind, FrameKind::kError);
  EXPECT_EQ(error.message, "cannot build the upstream");
  FrameWriter empty(kHeader);
  EXPECT_TRUE(reader.read(empty.finish()).elements.empty());
}

// The frame's bytes received cut in two at every offset: a tensor wholly in one received
// buffer is a view of it, one cut by the transport is copied once, and the two counts
// add up to the tensors' bytes.
TEST(Frame, ATensorInOneSliceIsAViewOthersAreCopied) {
  const std::string bytes = joined(two_elements());
  const size_t tensor_bytes = 2 * (24 * 24 * 3 + 33 * 4 + 8);
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    const Frame received{buffer_of(bytes.substr(0, cut)), buffer_of(bytes.substr(cut))};
    FrameReader reader("worker w1");
    const FrameContent got = reader.read(received);
    ASSERT_EQ(got.elements.size(), 2u);
    expect_same(got.elements[1].example, element(101, 2));
    const auto& c = reader.counters();
    EXPECT_EQ(c.view_bytes + c.copied_bytes, tensor_bytes) << "cut at " << cut;
    EXPECT_EQ(c.received_bytes, bytes.size());
    // Element 0's crop lies at bytes [165, 165 + 1728) (see the offsets below).
    const Tensor& image = got.elements[0].example.get("image");
    const bool viewed = image.buffer() == received[0] || image.buffer() == received[1];
    EXPECT_EQ(viewed, cut <= 165 || cut >= 165 + 1728) << "cut at " << cut;
    if (cut == 0 || cut == bytes.size()) {
      EXPECT_GE(c.view_bytes, 2u * 24 * 24 * 3);
    }
  }
}

TEST(Frame, AViewKeepsItsReceivedBufferAlive) {
  Tensor image;
  {
    const Frame received{buffer_of(joined(two_elements()))};
    FrameReader reader("worker w1");
    image = reader.read(received).elements[1].example.get("image");
    EXPECT_EQ(image.buffer(), received[0]);
  }
  // The frame is gone; the view still reads its bytes (ASan checks it).
  EXPECT_TRUE(image.equals(element(101, 2).get("image")));
}

void expect_refused(const Frame& frame, const std::string& needle) {
  FrameReader reader("worker w1 (10.0.0.5:41071)");
  try {
    reader.read(frame);
    ADD_FAILURE() << "no error for a frame that should have: " << needle;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("frame from worker w1 (10.0.0.5:41071): "), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

// The u64 at `at` replaced by `value`.
std::string patched_bytes(std::string bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}
Frame patched(const std::string& bytes, size_t at, uint64_t value) {
  return Frame{buffer_of(patched_bytes(bytes, at, value))};
}

TEST(Frame, TruncatedOrCorruptFramesNameThePeer) {
  const std::string bytes = joined(two_elements());
  for (size_t n = 0; n < bytes.size(); ++n)
    expect_refused(Frame{buffer_of(bytes.substr(0, n))}, "truncated: ");
  // The last field, 'none' of shape [0, 4], ends with its two dimensions and length.
  const size_t cut = bytes.size() - 10;
  expect_refused(Frame{buffer_of(bytes.substr(0, cut))},
                 "truncated: tensor shape needs 16 bytes, 14 are left in element 1 (record 8), "
                 "field 'none' at byte " +
                     std::to_string(bytes.size() - 24) + " of " + std::to_string(cut));
  expect_refused(Frame{buffer_of(bytes + "xyz")}, "3 bytes after the frame's end at byte");
  expect_refused(patched(bytes, 0, 9), "unknown frame kind 9 at byte 0 of");
  expect_refused(patched(bytes, 40, 1'000'000), "1000000 elements do not fit");
  // Element 0: record at 48, batch flag 56, rows 64, id 72, echo 80, fields 88; its
  // first field's name length at 96, "image" at 104, then flag 109, dtype 117, rank 125.
  expect_refused(patched(bytes, 56, 2), "bad batch flag 2 (not 0 or 1) in element 0 (record 7)");
  expect_refused(patched(bytes, 117, 5),
                 "bad dtype 5 in element 0 (record 7), field 'image' at "
                 "byte 117 of");
  expect_refused(patched(bytes, 125, 65), "bad tensor rank 65");
  expect_refused(patched(bytes, 133, ~0ULL), "negative tensor dimension -1");
  expect_refused(patched(bytes, 133, 1ULL << 40), "tensor of 1728 bytes where its shape");
  expect_refused(patched(bytes, 96, 1ULL << 50), "truncated: field name needs");
  // Dimensions whose product overflows, with a 0 after them (found by the fuzz target).
  // [2^62, 3, 0] of 0 bytes: 0 elements, but 2^62 * 3 overflows int64_t.
  std::string big = patched_bytes(patched_bytes(bytes, 133, 1ULL << 62), 141, 3);
  expect_refused(patched(patched_bytes(big, 149, 0), 157, 0),
                 "tensor shape too large in element 0 (record 7), field 'image' at byte 141");
}

TEST(Frame, RandomDamageIsRefusedOrReadNeverACrash) {
  const std::string bytes = joined(two_elements());
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string damaged = bytes;
    for (int k = 0; k < 1 + round % 4; ++k) damaged[rng() % damaged.size()] ^= (1 + rng() % 255);
    FrameReader reader("worker w1");
    try {
      reader.read(Frame{buffer_of(damaged)});
    } catch (const Error& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find("frame from worker w1: "), std::string::npos);
    }
  }
  EXPECT_GT(refused, 100);  // header damage is caught; tensor bytes are not checked
}

// Frames of crops over both transports: sent by a server stream, read back equal, with
// their ids, echo indices and records.
class FrameOverTransport : public ::testing::TestWithParam<std::string> {};

TEST_P(FrameOverTransport, ElementsArriveIntact) {
  std::shared_ptr<Transport> transport;
  if (GetParam() == "in_process") {
    transport = in_process_transport();
  } else {
#ifndef DATAECHO_HAVE_GRPC_PLUGIN
    GTEST_SKIP() << "this build has no gRPC plugin (TSan, or built without libgrpc++-dev)";
#endif
    transport = grpc_transport();
  }
  constexpr int kFrames = 6, kPerFrame = 16;
  Handlers handlers;
  handlers.is_stream = [](const std::string&) { return true; };
  handlers.stream = [&](const std::string&, std::string_view, ServerCall& call) {
    for (int f = 0; f < kFrames; ++f) {
      FrameWriter w(kHeader);
      for (int i = 0; i < kPerFrame; ++i) w.add(f * kPerFrame + i, element(f * kPerFrame + i, f));
      if (!call.write(w.finish())) return;
    }
    call.write(piece_done_frame(kHeader, kFrames * kPerFrame));
  };
  auto server = transport->start_server("127.0.0.1:0", {}, "", handlers);
  auto channel = transport->open_channel("127.0.0.1:" + std::to_string(server->port()));
  auto stream = channel->stream(kStream, "");
  FrameReader reader("worker w1");
  Frame frame;
  int64_t next = 0;
  while (stream->next(frame, 10'000) == ClientStream::Next::kFrame) {
    const FrameContent got = reader.read(frame);
    if (got.header.kind == FrameKind::kPieceDone) {
      EXPECT_EQ(got.records, next);
      continue;
    }
    for (const auto& e : got.elements) {
      EXPECT_EQ(e.record, next);
      expect_same(e.example, element(next, static_cast<int32_t>(next / kPerFrame)));
      ++next;
    }
  }
  EXPECT_EQ(next, kFrames * kPerFrame);
  // In process the receiver gets the sender's buffers: every slice is viewed.
  if (GetParam() == "in_process") {
    EXPECT_EQ(reader.counters().view_bytes, static_cast<uint64_t>(next) * (24 * 24 * 3 + 33 * 4));
  }
  server->stop(1000);
}

INSTANTIATE_TEST_SUITE_P(Service, FrameOverTransport, ::testing::Values("grpc", "in_process"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dataecho::service
