#include <gtest/gtest.h>

#include "dataecho/ops/batch.h"
#include "dataecho/ops/sources.h"
#include "test_util.h"

namespace dataecho::testing {
namespace {

std::vector<Example> images(int n, Shape shape) {
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> px(static_cast<size_t>(shape_elements(shape)), static_cast<float>(i));
    Example e;
    e.set("image", Tensor::from_vector(px, shape));
    e.set("label", Tensor::scalar<int64_t>(i % 3));
    out.push_back(std::move(e));
  }
  return out;
}

TEST(Batch, CollatesEachFieldIntoOneContiguousBuffer) {
  auto it = make_batch(make_memory_source(images(5, {2, 3})), {2, false})->make_iterator({});
  auto out = drain(*it);
  ASSERT_EQ(out.size(), 3u);
  const Tensor& img = out[1].get("image");
  EXPECT_EQ(img.shape(), (Shape{2, 2, 3}));
  EXPECT_NE(img.buffer(), nullptr);
  EXPECT_FLOAT_EQ(img.data<float>()[0], 2.0f);
  EXPECT_FLOAT_EQ(img.data<float>()[6], 3.0f);
  EXPECT_EQ(out[1].get("label").shape(), (Shape{2}));
  EXPECT_EQ(out[1].get("label").data<int64_t>()[1], 0);
  EXPECT_EQ(ids(out), iota(5));
  EXPECT_TRUE(out[0].is_batch());
  EXPECT_EQ(out[2].num_rows(), 1u) << "the remainder is kept by default";
  EXPECT_EQ(out[0].fresh_rows(), 2u);
}

TEST(Batch, DropRemainder) {
  auto it = make_batch(make_range({10}), {4, true})->make_iterator({});
  auto out = drain(*it);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(ids(out), iota(8));
}

TEST(Batch, ShapeMismatchNamesFieldAndBothShapes) {
  auto ex = images(3, {2, 3});
  ex[2].set("image", Tensor::from_vector<float>(std::vector<float>(8), {2, 4}));
  auto it = make_batch(make_memory_source(ex), {3, false})->make_iterator({});
  std::string msg = error_of([&] { drain(*it); });
  EXPECT_NE(msg.find("'image'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("id 2"), std::string::npos) << msg;
}

TEST(Batch, MissingFieldIsAnError) {
  auto ex = images(2, {1});
  ex[1].erase("label");
  auto it = make_batch(make_memory_source(ex), {2, false})->make_iterator({});
  std::string msg = error_of([&] { drain(*it); });
  EXPECT_NE(msg.find("'label'"), std::string::npos) << msg;
}

TEST(Batch, ExtraFieldIsAnErrorNamingBothIds) {
  auto ex = images(2, {1});
  ex[1].set("mask", Tensor::scalar<int64_t>(1));
  auto it = make_batch(make_memory_source(ex), {2, false})->make_iterator({});
  std::string msg = error_of([&] { drain(*it); });
  EXPECT_NE(msg.find("field 'mask' is in element id 1 but missing in element id 0"),
            std::string::npos)
      << msg;
}

// The builder copies each element in as it is added: the element can go at once, a
// batch with fewer rows than its capacity views the first rows, and the builder is
// empty and reusable after finish().
TEST(Batch, BuilderCopiesOnAddAndFinishesShort) {
  BatchBuilder b(4);
  for (auto& e : images(3, {2})) {
    Example moved = std::move(e);
    b.add(moved);
  }  // every element is gone here
  EXPECT_EQ(b.size(), 3);
  Example out = b.finish();
  EXPECT_EQ(b.size(), 0);
  const Tensor& img = out.get("image");
  ASSERT_EQ(img.shape(), (Shape{3, 2}));
  EXPECT_EQ(std::vector<float>(img.data<float>(), img.data<float>() + 6),
            (std::vector<float>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(out.get("label").shape(), (Shape{3}));
  EXPECT_EQ(out.num_rows(), 3u);
  b.add(images(1, {5})[0]);  // a new batch may have other shapes
  EXPECT_EQ(b.finish().get("image").shape(), (Shape{1, 5}));
  EXPECT_NE(error_of([&] { b.finish(); }).find("no elements"), std::string::npos);
}

TEST(Batch, RejectsZeroSize) { EXPECT_THROW(make_batch(make_range({3}), {0, false}), Error); }

}  // namespace
}  // namespace dataecho::testing
