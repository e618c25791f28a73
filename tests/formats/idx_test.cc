#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <fstream>

#include "dataecho/formats/idx.h"
#include "dataecho/spec/build.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::error_of;
using testing::run;
using testing::temp_dir;

const std::string kDir = "/usr/share/datasets/fashion-mnist/";

std::string idx_spec(const std::string& split, const std::string& extra = "") {
  return R"({"source": {"kind": "idx", "images": ")" + kDir + split +
         R"(-images-idx3-ubyte.gz", "labels": ")" + kDir + split + R"(-labels-idx1-ubyte.gz")" +
         extra + "}}";
}

std::array<int64_t, 10> histogram(const std::vector<Example>& v) {
  std::array<int64_t, 10> h{};
  for (const auto& e : v) {
    int64_t l = e.get("label").item<int64_t>();
    EXPECT_GE(l, 0);
    EXPECT_LT(l, 10);
    if (l >= 0 && l < 10) ++h[static_cast<size_t>(l)];
  }
  return h;
}

TEST(Idx, FashionMnistTrainCountsShapesAndHistogram) {
  auto v = run(idx_spec("train"));
  ASSERT_EQ(v.size(), 60000u);
  for (size_t i : {size_t{0}, size_t{59999}}) {
    EXPECT_EQ(v[i].id(), static_cast<int64_t>(i));
    const Tensor& img = v[i].get("image");
    EXPECT_EQ(img.dtype(), DType::kUInt8);
    EXPECT_EQ(img.shape(), (Shape{28, 28, 1}));
    EXPECT_EQ(v[i].get("label").dtype(), DType::kInt64);
    EXPECT_EQ(v[i].get("label").rank(), 0u);
  }
  for (int64_t c : histogram(v)) EXPECT_EQ(c, 6000);
  // Zero copy: all images are views of one buffer.
  EXPECT_TRUE(v[0].get("image").shares_buffer_with(v[59999].get("image")));
}

TEST(Idx, FashionMnistTestCountsAndHistogram) {
  auto v = run(idx_spec("t10k"));
  ASSERT_EQ(v.size(), 10000u);
  for (int64_t c : histogram(v)) EXPECT_EQ(c, 1000);
  // Not a blank image: Fashion-MNIST pictures use most of the 0..255 range.
  const Tensor& img = v[0].get("image");
  int max = 0;
  for (int64_t i = 0; i < img.num_elements(); ++i) max = std::max<int>(max, img.data<uint8_t>()[i]);
  EXPECT_GT(max, 200);
}

TEST(Idx, LimitSaveRestore) {
  auto v = run(idx_spec("t10k", R"(, "limit": 25)"));
  ASSERT_EQ(v.size(), 25u);
  EXPECT_EQ(v.back().id(), 24);
  testing::expect_save_restore_identical(idx_spec("t10k", R"(, "limit": 30)"), {0, 7, 30});
}

// A small IDX pair written by the test, plain or gzipped.
void write_idx(const std::string& path, uint8_t type, std::vector<uint32_t> dims,
               const std::string& data, bool gzip, size_t cut = 0) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
  }
  bytes += data;
  bytes.resize(bytes.size() - cut);
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

std::string pixels(int n, int h, int w) {
  std::string s;
  for (int i = 0; i < n * h * w; ++i) s.push_back(static_cast<char>(i % 256));
  return s;
}

std::vector<Example> run_in(const std::string& dir, const std::string& spec) {
  auto p = build_pipeline(parse_spec_text(spec, "test"), BuildOptions{dir});
  return testing::drain(*p);
}

TEST(Idx, PlainAndGzippedFilesAndRelativePaths) {
  std::string dir = temp_dir();
  for (bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "plain");
    std::string sfx = gz ? ".gz" : "";
    write_idx(dir + "/img" + sfx, 0x08, {3, 2, 4}, pixels(3, 2, 4), gz);
    write_idx(dir + "/lab" + sfx, 0x0C, {3}, std::string("\0\0\0\7\0\0\0\2\xff\xff\xff\xff", 12),
              gz);
    auto v = run_in(dir, R"({"source": {"kind": "idx", "images": "img)" + sfx +
                             R"(", "labels": "lab)" + sfx + R"("}})");
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(testing::values(v, "label"), (std::vector<int64_t>{7, 2, -1}));
    EXPECT_EQ(v[1].get("image").shape(), (Shape{2, 4, 1}));
    EXPECT_EQ(v[1].get("image").data<uint8_t>()[0], 8);
    EXPECT_EQ(v[2].get("image").data<uint8_t>()[7], 23);
  }
  // Without labels: images only; a 4-d file keeps its channels.
  write_idx(dir + "/rgb", 0x08, {2, 1, 2, 3}, pixels(2, 1, 6), false);
  auto v = run_in(dir, R"({"source": {"kind": "idx", "images": "rgb"}})");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].get("image").shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(v[0].find("label"), nullptr);
}

TEST(Idx, BadFilesAreErrorsNamingTheFile) {
  std::string dir = temp_dir();
  write_idx(dir + "/img", 0x08, {3, 2, 2}, pixels(3, 2, 2), false);
  write_idx(dir + "/lab4", 0x08, {4}, std::string(4, '\1'), false);
  std::ofstream(dir + "/junk", std::ios::binary) << "this is not an idx file";
  write_idx(dir + "/short", 0x08, {3, 2, 2}, pixels(3, 2, 2), true, 5);
  write_idx(dir + "/lab3", 0x08, {3}, std::string(3, '\1'), false);

  std::string msg = error_of(
      [&] { run_in(dir, R"({"source": {"kind": "idx", "images": "img", "labels": "lab4"}})"); });
  EXPECT_NE(msg.find(dir + "/lab4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 labels"), std::string::npos) << msg;
  msg = error_of([&] { run_in(dir, R"({"source": {"kind": "idx", "images": "junk"}})"); });
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/junk"), std::string::npos) << msg;
  msg = error_of([&] { run_in(dir, R"({"source": {"kind": "idx", "images": "lab3"}})"); });
  EXPECT_NE(msg.find("3 dimensions"), std::string::npos) << msg;
  msg = error_of([&] { run_in(dir, R"({"source": {"kind": "idx", "images": "missing"}})"); });
  EXPECT_NE(msg.find(dir + "/missing"), std::string::npos) << msg;

  // Truncated data: an error by default; with on_error "skip" the complete examples.
  msg = error_of(
      [&] { run_in(dir, R"({"source": {"kind": "idx", "images": "short", "labels": "lab3"}})"); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/short"), std::string::npos) << msg;
  auto p = build_pipeline(
      parse_spec_text(
          R"({"source": {"kind": "idx", "images": "short", "labels": "lab3", "on_error": "skip"}})",
          "t"),
      BuildOptions{dir});
  auto v = testing::drain(*p);
  EXPECT_EQ(v.size(), 1u);
  EXPECT_EQ(p->stats().nodes()[0]->counter("bytes_lost").load(), 8);
}

}  // namespace
}  // namespace dataecho
