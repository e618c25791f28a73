// convert_dataset: Fashion-MNIST IDX to every output format, read back by the sources.
#include <gtest/gtest.h>

#include <filesystem>

#include "dataecho/formats/convert.h"
#include "dataecho/image/codec.h"
#include "test_util.h"

namespace dataecho {
namespace {

namespace fs = std::filesystem;
using testing::run;
using testing::temp_dir;

const std::string kImages = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
const std::string kLabels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

std::vector<Example> idx_head(int n) {
  return run(R"({"source": {"kind": "idx", "images": ")" + kImages + R"(", "labels": ")" + kLabels +
             R"(", "limit": )" + std::to_string(n) + "}}");
}

ConvertOptions idx_options(const std::string& to, int limit, int shards) {
  ConvertOptions o;
  o.idx_images = kImages;
  o.idx_labels = kLabels;
  o.limit = limit;
  o.to = to;
  o.shards = shards;
  o.out_dir = temp_dir() + "/out";
  o.name = "fm";
  return o;
}

TEST(Convert, IdxToTfRecordShardsIsLossless) {
  auto o = idx_options("tfrecord", 40, 3);
  ConvertSummary s = convert_dataset(o);
  EXPECT_EQ(s.files, 3);
  EXPECT_EQ(s.records, 40);
  ASSERT_TRUE(fs::exists(o.out_dir + "/fm-00002-of-00003.tfrecord"));
  int64_t bytes = 0;
  for (auto& f : fs::directory_iterator(o.out_dir)) bytes += static_cast<int64_t>(f.file_size());
  EXPECT_EQ(s.bytes, bytes);
  auto want = idx_head(40);
  auto got = run(R"({"source": {"kind": "tfrecord", "uri": ")" + o.out_dir + R"(/fm-*.tfrecord",
      "features": {"image": {"key": "image/encoded"}, "label": {"key": "image/class/label"}}}})");
  ASSERT_EQ(got.size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_EQ(got[i].get("label").item<int64_t>(), want[i].get("label").item<int64_t>());
    Tensor img = decode_image(got[i].get("image").bytes());
    EXPECT_TRUE(img.equals(want[i].get("image"))) << "record " << i;
  }
  // What convert writes decodes with the defaults: no features mapping, decode_image
  // reading its default field.
  auto plain = run(R"({"source": {"kind": "tfrecord", "uri": ")" + o.out_dir +
                   R"(/fm-*.tfrecord"}, "stages": [{"op": "map", "fn": "decode_image"}]})");
  ASSERT_EQ(plain.size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_EQ(plain[i].get("label").item<int64_t>(), want[i].get("label").item<int64_t>());
    EXPECT_TRUE(plain[i].get("image").equals(want[i].get("image"))) << "record " << i;
  }
}

TEST(Convert, IdxToTarShardsReadsBack) {
  auto o = idx_options("tar", 20, 2);
  ConvertSummary s = convert_dataset(o);
  EXPECT_EQ(s.files, 2);
  auto want = idx_head(20);
  auto got = run(R"({"source": {"kind": "tar", "uri": ")" + o.out_dir +
                 R"(/fm-*.tar", "fields": {"image": "png", "label": "cls"}}})");
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(got[10].id(), int64_t{1} << 40);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(got[i].get("label").item<int64_t>(), want[i].get("label").item<int64_t>());
    EXPECT_TRUE(decode_image(got[i].get("image").bytes()).equals(want[i].get("image")));
  }
}

TEST(Convert, IdxToDirectoryAndBackToJpegResized) {
  auto o = idx_options("dir", 30, 1);
  convert_dataset(o);
  auto want = idx_head(30);
  int64_t files = 0;
  for (auto& f : fs::recursive_directory_iterator(o.out_dir)) files += f.is_regular_file();
  EXPECT_EQ(files, 30);
  std::string label = std::to_string(want[7].get("label").item<int64_t>());
  EXPECT_TRUE(fs::exists(o.out_dir + "/" + label + "/00000007.png"));

  // The directory layout as an input: JPEG, resized, RGB, to tfrecord.
  ConvertOptions d;
  d.input_dir = o.out_dir;
  d.to = "tfrecord";
  d.out_dir = temp_dir() + "/jpeg";
  d.encode = "jpeg";
  d.quality = 85;
  d.resize = 64;
  d.channels = 3;
  ConvertSummary s = convert_dataset(d);
  EXPECT_EQ(s.records, 30);
  auto got = run(R"({"source": {"kind": "tfrecord", "uri": ")" + d.out_dir + R"(/*.tfrecord"}})");
  ASSERT_EQ(got.size(), 30u);
  Tensor img = decode_image(got[0].get("image").bytes());
  EXPECT_EQ(img.shape(), (Shape{64, 64, 3}));
  EXPECT_EQ(got[0].get("image/height").item<int64_t>(), 64);
  EXPECT_EQ(std::string(got[0].get("image/format").bytes()), "jpeg");
  // Directory labels are the sorted class names' indexes: here the digits themselves.
  std::vector<int64_t> labels;
  for (const auto& e : got) labels.push_back(e.get("label").item<int64_t>());
  EXPECT_TRUE(std::is_sorted(labels.begin(), labels.end()));
}

TEST(Convert, BadOptionsAreErrors) {
  auto o = idx_options("parquet", 1, 1);
  EXPECT_NE(testing::error_of([&] { convert_dataset(o); }).find("tfrecord, tar or dir"),
            std::string::npos);
  o = idx_options("tar", 1, 1);
  o.idx_images = "/nonexistent.gz";
  EXPECT_NE(testing::error_of([&] { convert_dataset(o); }).find("/nonexistent.gz"),
            std::string::npos);
}

}  // namespace
}  // namespace dataecho
