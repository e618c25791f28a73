#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "dataecho/core/example.h"
#include "dataecho/core/tensor.h"

namespace dataecho {
namespace {

TEST(Tensor, ScalarRoundTrip) {
  Tensor t = Tensor::scalar<int64_t>(42);
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_EQ(t.rank(), 0u);
  EXPECT_EQ(t.item<int64_t>(), 42);
  EXPECT_EQ(t.nbytes(), 8u);
}

TEST(Tensor, CopiesShareTheBuffer) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = a;
  EXPECT_TRUE(a.shares_buffer_with(b));
  EXPECT_EQ(a.raw_data(), b.raw_data());
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(b.data<float>()[5], 6.0f);
}

TEST(Tensor, AllDtypes) {
  EXPECT_EQ(Tensor::from_vector<uint8_t>({1, 2}).dtype(), DType::kUInt8);
  EXPECT_EQ(Tensor::from_vector<int32_t>({1, 2}).dtype(), DType::kInt32);
  EXPECT_EQ(Tensor::from_vector<int64_t>({1, 2}).dtype(), DType::kInt64);
  EXPECT_EQ(Tensor::from_vector<float>({1, 2}).dtype(), DType::kFloat32);
  for (auto d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
}

TEST(Tensor, WrongDtypeAccessIsAnError) {
  Tensor t = Tensor::scalar<int32_t>(1);
  try {
    t.item<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos);
  }
}

TEST(Tensor, SizeMismatchIsAnError) {
  std::vector<uint8_t> v(5);
  EXPECT_THROW(Tensor::from_data(DType::kFloat32, {2}, v.data(), v.size()), Error);
  auto buf = Buffer::allocate(4);
  EXPECT_THROW(Tensor(DType::kInt64, {1}, buf), Error);
}

TEST(Tensor, ReshapeSharesAndChecks) {
  Tensor a = Tensor::from_vector<int32_t>({1, 2, 3, 4});
  Tensor b = a.reshaped({2, 2});
  EXPECT_TRUE(a.shares_buffer_with(b));
  EXPECT_THROW(a.reshaped({3}), Error);
}

TEST(Tensor, WrapReleasesOnce) {
  int released = 0;
  std::vector<std::byte> storage(16);
  {
    auto buf = Buffer::wrap(storage.data(), storage.size(), [&] { ++released; });
    Tensor t(DType::kFloat32, {4}, buf);
    Tensor u = t;
    buf.reset();
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(Tensor, CompactedCopiesOnlyWhatPinsMore) {
  // A small tensor in a large buffer (a row of a batch) pins the buffer; compacted()
  // copies it into one of its own. A tensor that fills its buffer is left as it is.
  auto big = Buffer::allocate(1 << 20);
  std::memset(big->mutable_data(), 7, 1 << 20);
  Tensor row(DType::kUInt8, {1000}, big, 4096);
  EXPECT_EQ(big->footprint(), size_t{1} << 20);
  EXPECT_TRUE(row.pins_more_than_itself());
  Tensor own = row.compacted();
  EXPECT_FALSE(own.pins_more_than_itself());
  EXPECT_FALSE(own.shares_buffer_with(row));
  EXPECT_TRUE(own.equals(row));
  Tensor whole(DType::kUInt8, {1 << 20}, big);
  EXPECT_TRUE(whole.compacted().shares_buffer_with(whole));
  EXPECT_FALSE(Tensor::scalar<int64_t>(3).pins_more_than_itself());

  // wrap() with a footprint: a record inside a reader's chunk.
  int released = 0;
  {
    static std::byte chunk[8192];
    auto view = Buffer::wrap(
        chunk + 100, 200, [&] { ++released; }, sizeof chunk);
    EXPECT_EQ(view->footprint(), sizeof chunk);
    Example e;
    e.set("record", Tensor(DType::kUInt8, {200}, view));
    e.set("label", Tensor::scalar<int64_t>(1));
    e.compact();
    EXPECT_FALSE(e.get("record").shares_buffer_with(Tensor(DType::kUInt8, {200}, view)));
  }
  EXPECT_EQ(released, 1);
}

TEST(Tensor, MakeSkewsAFreshBufferButFillsASlotWhereItIs) {
  auto fill = [](std::byte* p) { std::memset(p, 5, 48); };
  Tensor plain = Tensor::make(DType::kUInt8, {16, 3}, fill);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(plain.raw_data()) % 64, 0u);
  Tensor skewed = Tensor::make(DType::kUInt8, {16, 3}, fill, 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(skewed.raw_data()) % 64, 8u);
  EXPECT_EQ(skewed.offset(), 8u);
  EXPECT_TRUE(skewed.equals(plain));
  EXPECT_FALSE(skewed.pins_more_than_itself());

  // A matching output slot is filled at its own offset, skew or not.
  OutputSlot slot;
  slot.shape = {16, 3};
  slot.buffer = Buffer::allocate(4096);
  slot.offset = 128;
  {
    ScopedOutputSlot scope(&slot);
    Tensor placed = Tensor::make(DType::kUInt8, {16, 3}, fill, 8);
    EXPECT_TRUE(slot.taken);
    EXPECT_EQ(placed.offset(), 128u);
    EXPECT_EQ(placed.raw_data(), slot.buffer->data() + 128);
    EXPECT_TRUE(placed.equals(plain));
  }
}

TEST(Example, FieldsAndProvenance) {
  Example e(7);
  e.set("x", Tensor::scalar<float>(1.5f));
  e.set("y", Tensor::scalar<int64_t>(3));
  e.set("x", Tensor::scalar<float>(2.5f));
  EXPECT_EQ(e.fields().size(), 2u);
  EXPECT_FLOAT_EQ(e.get("x").item<float>(), 2.5f);
  EXPECT_EQ(e.id(), 7);
  EXPECT_EQ(e.echo(), 0);
  EXPECT_EQ(e.fresh_rows(), 1u);
  try {
    e.get("z");
    FAIL();
  } catch (const Error& err) {
    std::string m = err.what();
    EXPECT_NE(m.find("'z'"), std::string::npos) << m;
    EXPECT_NE(m.find("x, y"), std::string::npos) << m;
    EXPECT_NE(m.find("id 7"), std::string::npos) << m;
  }
}

TEST(Example, BatchRowsAndEcho) {
  Example b;
  b.set_rows({{1, 0}, {2, 1}, {3, 0}});
  EXPECT_TRUE(b.is_batch());
  EXPECT_EQ(b.num_rows(), 3u);
  EXPECT_EQ(b.fresh_rows(), 2u);
  Example c = b;
  c.add_echo(1);
  EXPECT_EQ(c.row(1).echo, 2);
  EXPECT_EQ(b.row(1).echo, 1) << "copies keep their own metadata";
  EXPECT_EQ(c.fresh_rows(), 0u);
}

}  // namespace
}  // namespace dataecho
