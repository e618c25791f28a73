#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "dataecho/core/example_json.h"
#include "dataecho/ops/batch.h"
#include "dataecho/ops/map.h"
#include "dataecho/ops/sources.h"
#include "dataecho/spec/build.h"
#include "ops/batch_builder.h"
#include "ops/map_and_batch.h"
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

// ---- map-and-batch fusion ----

std::string noise_spec(int parallelism, const std::string& between = "",
                       const std::string& map_extra = "") {
  // 4096 floats: 16 KiB, the smallest row the fusion places.
  return R"({"seed": 5, "source": {"kind": "range", "count": 50}, "stages": [
      {"op": "map", "fn": "random_noise", "args": {"size": 4096}, "parallelism": )" +
         std::to_string(parallelism) + map_extra + "}, " + between +
         R"({"op": "batch", "size": 8}]})";
}

int64_t placed_rows(Pipeline& p) {
  auto stats = p.stats();
  for (const auto& n : stats.nodes())
    if (n->name.find("batch") != std::string::npos) return n->counter("placed_rows").load();
  return -1;
}

std::vector<std::string> as_json(const std::vector<Example>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(example_to_json(e, true).dump());
  return out;
}

TEST(BatchFusion, MapComputesRowsInPlaceAndTheBatchesAreTheSame) {
  for (int parallelism : {1, 3}) {
    SCOPED_TRACE("parallelism " + std::to_string(parallelism));
    // The map's buffer is fixed: its default grows for cheap elements (64 of these 16 KiB
    // rows fit its 1 MiB), and on a loaded machine all 50 could be computed before the
    // batch chooses its column.
    const std::string buffer = R"(, "buffer": 4)";
    auto fused = build(noise_spec(parallelism, "", buffer));
    auto a = drain(*fused);
    // A second map in between takes the fusion: its outputs are the first map's tensors,
    // computed elsewhere, so every row is copied as without fusion.
    auto plain = build(
        noise_spec(parallelism, R"({"op": "map", "fn": "identity", "parallelism": 1}, )", buffer));
    auto b = drain(*plain);
    ASSERT_EQ(a.size(), 7u);
    EXPECT_EQ(as_json(a), as_json(b));
    EXPECT_EQ(a.back().num_rows(), 2u) << "the short last batch";
    EXPECT_EQ(placed_rows(*plain), 0);
    // Only outputs computed before the first batch chose its column are copied: one
    // with a synchronous map; with threads, at most the first element and the map's
    // capacity (3 workers + 4) behind it, since taking the first makes room for one more.
    int64_t placed = placed_rows(*fused);
    if (parallelism == 1) {
      EXPECT_EQ(placed, 49);
    }
    EXPECT_GE(placed, 50 - 8);
    // The rows are where the map wrote them: the batch's buffer is one per batch.
    EXPECT_EQ(a[3].get("noise").shape(), (Shape{8, 4096}));
  }
}

TEST(BatchFusion, UnorderedMapIsNotFused) {
  auto p = build(noise_spec(3, "", R"(, "deterministic": false)"));
  auto v = drain(*p);
  EXPECT_EQ(placed_rows(*p), 0);
  auto want = drain(*build(noise_spec(1)));
  // The same rows, in another order: compare each id's noise.
  std::map<int64_t, std::vector<float>> got, expect;
  for (auto* pair : {&v, &want}) {
    auto& m = pair == &v ? got : expect;
    for (const auto& b : *pair) {
      const float* f = b.get("noise").data<float>();
      for (size_t r = 0; r < b.num_rows(); ++r)
        m[b.row(r).id] = std::vector<float>(f + r * 4096, f + (r + 1) * 4096);
    }
  }
  EXPECT_EQ(got, expect);
}

TEST(BatchFusion, SaveRestoreIsIdentical) {
  expect_save_restore_identical(noise_spec(1), {0, 1, 3, 6, 7});
  expect_save_restore_identical(noise_spec(3), {0, 1, 3, 6, 7});
  // Restored into the pipeline that saved, after it went on: the numbering of rows
  // starts again with the restored position.
  for (int parallelism : {1, 3}) {
    SCOPED_TRACE("parallelism " + std::to_string(parallelism));
    auto full = as_json(drain(*build(noise_spec(parallelism))));
    auto p = build(noise_spec(parallelism));
    drain(*p, 2);
    std::string state = p->save();
    drain(*p, 3);
    p->restore(state);
    auto rest = as_json(drain(*p));
    EXPECT_EQ(rest, std::vector<std::string>(full.begin() + 2, full.end()));
  }
}

TEST(BatchFusion, IsARewriteOfTheBuildThatCanBeTurnedOff) {
  // The build fuses; without the rewrite the same batches come out, every row copied by
  // the batch.
  for (int parallelism : {1, 3}) {
    SCOPED_TRACE("parallelism " + std::to_string(parallelism));
    BuildOptions off;
    off.map_and_batch_fusion = false;
    auto plain = build_pipeline(nlohmann::json::parse(noise_spec(parallelism)), off);
    auto b = drain(*plain);
    EXPECT_EQ(placed_rows(*plain), 0);
    EXPECT_EQ(as_json(b), as_json(drain(*build(noise_spec(parallelism)))));
  }
  // The rewrite itself: only a batch right over a map that keeps order is replaced.
  MapOptions m;
  m.fn = [](Example e, const MapContext&) { return e; };
  auto over_map = make_batch(make_map(make_range({4}), m), {2, false});
  EXPECT_NE(fuse_map_and_batch(over_map), over_map);
  auto fused = fuse_map_and_batch(over_map);
  EXPECT_EQ(fuse_map_and_batch(fused), fused) << "fusing twice changes nothing";
  auto over_range = make_batch(make_range({4}), {2, false});
  EXPECT_EQ(fuse_map_and_batch(over_range), over_range);
  m.parallelism = 2;
  m.deterministic = false;
  auto over_unordered = make_batch(make_map(make_range({4}), m), {2, false});
  EXPECT_EQ(fuse_map_and_batch(over_unordered), over_unordered);
  auto map_only = make_map(make_range({4}), m);
  EXPECT_EQ(fuse_map_and_batch(map_only), map_only);
  // A fused batch made by hand gives what the plain one gives.
  std::vector<std::string> want, got;
  for (auto& e : drain(*over_map->make_iterator({})))
    want.push_back(example_to_json(e, true).dump());
  for (auto& e : drain(*fused->make_iterator({}))) got.push_back(example_to_json(e, true).dump());
  EXPECT_EQ(got, want);
}

TEST(BatchFusion, BuilderPlacesOnlyAUniqueLargeColumnAndRefusesAMisplacedRow) {
  auto element = [](int64_t id, RowPlacer* placer, int64_t k) {
    OutputSlot slot;
    bool armed = placer != nullptr && placer->slot_for(k, &slot);
    ScopedOutputSlot scope(armed ? &slot : nullptr);
    Example e(id);
    e.set("a", Tensor::make(DType::kFloat32, {8192}, [&](std::byte* out) {
            std::memset(out, static_cast<int>(id), 8192 * 4);
          }));
    return e;
  };
  {
    // Two fields of one dtype and shape: which row is whose would be ambiguous.
    RowPlacer placer(4);
    BatchBuilder b(4, "batch", &placer, 0);
    Example e = element(0, nullptr, 0);
    e.set("b", e.get("a"));
    b.add(e);
    EXPECT_FALSE(placer.has_column());
  }
  RowPlacer placer(4);
  BatchBuilder b(4, "batch", &placer, 0);
  b.add(element(0, nullptr, 0));  // chooses the column
  ASSERT_TRUE(placer.has_column());
  b.add(element(1, &placer, 1));  // computed in its row
  EXPECT_EQ(b.placed_rows(), 1);
  // Output 3 computed into row 3 but added as row 2: refused, nothing overwritten.
  Example wrong = element(3, &placer, 3);
  EXPECT_NE(error_of([&] { b.add(wrong); }).find("not in its row"), std::string::npos);
  b.add(element(2, &placer, 2));
  b.add(wrong);
  Example out = b.finish();
  const auto* bytes = reinterpret_cast<const unsigned char*>(out.get("a").raw_data());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(bytes[r * 8192 * 4 + 5], r) << "row " << r;
}

TEST(Batch, RejectsZeroSize) { EXPECT_THROW(make_batch(make_range({3}), {0, false}), Error); }

}  // namespace
}  // namespace dataecho::testing
