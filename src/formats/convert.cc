// convert_dataset (see dataecho/formats/convert.h). Reads one example at a time and
// writes it to its shard: memory stays at one image plus the writers' buffers.
#include "dataecho/formats/convert.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "convert_sink.h"
#include "dataecho/formats/idx.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/image/codec.h"
#include "dataecho/image/transforms.h"

namespace fs = std::filesystem;

namespace dataecho {
namespace {

using convert_detail::convert_error;
using convert_detail::Item;
using convert_detail::ShardSink;

// Re-encodes (and resizes) when asked; `hwc` is the decoded image.
void encode_into(const ConvertOptions& o, Tensor hwc, Item& item) {
  if (o.channels == 3 && hwc.shape()[2] == 1) {
    int64_t n = hwc.shape()[0] * hwc.shape()[1];
    const uint8_t* src = hwc.data<uint8_t>();
    hwc = Tensor::make(DType::kUInt8, {hwc.shape()[0], hwc.shape()[1], 3}, [&](std::byte* dst) {
      for (int64_t i = 0; i < n; ++i)
        dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = std::byte{src[i]};
    });
  }
  if (o.resize > 0) hwc = resize(hwc, o.resize, o.resize);
  item.height = static_cast<int>(hwc.shape()[0]);
  item.width = static_cast<int>(hwc.shape()[1]);
  if (o.encode == "jpeg") {
    item.bytes = encode_jpeg(hwc, o.quality);
    item.ext = "jpg";
  } else {
    item.bytes = encode_png(hwc);
    item.ext = "png";
  }
}

}  // namespace

namespace {

void check_options(const ConvertOptions& o) {
  if (o.to != "tfrecord" && o.to != "tar" && o.to != "dir") {
    convert_error(ErrorCode::kInvalidArgument,
                  "--to must be tfrecord, tar or dir, got \"" + o.to + "\"", "");
  }
  if (!o.encode.empty() && o.encode != "png" && o.encode != "jpeg") {
    convert_error(ErrorCode::kInvalidArgument,
                  "--encode must be png or jpeg, got \"" + o.encode + "\"", "");
  }
  if (o.shards < 1) convert_error(ErrorCode::kInvalidArgument, "--shards must be >= 1", "");
  const int inputs = !o.idx_images.empty() + !o.input_dir.empty() + !o.text.empty();
  if (inputs != 1) {
    convert_error(ErrorCode::kInvalidArgument,
                  "give one input: IDX images, an input directory or text files", "");
  }
}

// IDX images (and labels) into shards.
ConvertSummary convert_idx(const ConvertOptions& o,
                           const std::function<void(int64_t, int64_t, int64_t)>& progress) {
  IdxOptions io;
  io.images = o.idx_images;
  io.labels = o.idx_labels;
  io.limit = o.limit;
  auto ds = make_idx_source(io);
  // Count first (cheap: the data is cached in the dataset) so shards split evenly.
  int64_t total = read_idx_header(o.idx_images).dims[0];
  if (o.limit >= 0) total = std::min(total, o.limit);
  ShardSink sink(o, total);
  auto it = ds->make_iterator({});
  int64_t i = 0;
  while (auto e = it->next()) {
    Item item;
    item.label = e->find("label") ? e->get("label").item<int64_t>() : 0;
    item.class_name = std::to_string(item.label);
    encode_into(o, e->get("image"), item);
    sink.add(i++, item);
    if (progress && (i % 256 == 0 || i == total)) progress(i, total, sink.bytes());
  }
  sink.close_shard();
  return {sink.files(), i, sink.bytes()};
}

// The image files of a folder of class folders (class_name/file.{jpg,jpeg,png}), each
// with its class's index, classes and files in name order; `classes` gets the names.
std::vector<std::pair<std::string, int64_t>> class_files(const ConvertOptions& o,
                                                         std::vector<std::string>& classes) {
  for (const auto& d : fs::directory_iterator(o.input_dir)) {
    if (d.is_directory()) classes.push_back(d.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) convert_error(ErrorCode::kNotFound, "no class subdirectories", o.input_dir);
  std::vector<std::pair<std::string, int64_t>> files;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> in_class;
    for (const auto& f : fs::directory_iterator(fs::path(o.input_dir) / classes[c])) {
      std::string ext = f.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
      if (f.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".png"))
        in_class.push_back(f.path().string());
    }
    std::sort(in_class.begin(), in_class.end());
    for (auto& f : in_class) files.emplace_back(std::move(f), static_cast<int64_t>(c));
  }
  if (o.limit >= 0 && static_cast<int64_t>(files.size()) > o.limit)
    files.resize(static_cast<size_t>(o.limit));
  return files;
}

// One image file as an item: its bytes as they are, or decoded and encoded again when
// the options change it.
void image_item(const ConvertOptions& o, const std::string& path, std::string bytes, Item& item) {
  try {
    if (o.encode.empty() && o.resize == 0 && o.channels == 0) {
      ImageInfo info = read_image_info(bytes);
      item.height = info.height;
      item.width = info.width;
      item.ext = info.format == ImageFormat::kPng ? "png" : "jpg";
      item.bytes = std::move(bytes);
    } else {
      ConvertOptions oo = o;
      if (oo.encode.empty())
        oo.encode = sniff_image_format(bytes) == ImageFormat::kPng ? "png" : "jpeg";
      encode_into(oo, decode_image(bytes), item);
    }
  } catch (const Error& e) {
    throw e.with_context("convert", path);
  }
}

}  // namespace

ConvertSummary convert_dataset(const ConvertOptions& o,
                               const std::function<void(int64_t, int64_t, int64_t)>& progress) {
  check_options(o);
  fs::create_directories(o.out_dir);
  if (!o.idx_images.empty()) return convert_idx(o, progress);
  if (!o.text.empty()) return convert_detail::convert_text(o, progress);
  std::vector<std::string> classes;
  const auto files = class_files(o, classes);
  int64_t total = static_cast<int64_t>(files.size());
  ShardSink sink(o, total);
  for (int64_t i = 0; i < total; ++i) {
    const auto& [path, label] = files[static_cast<size_t>(i)];
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    if (!in.good() && !in.eof()) convert_error(ErrorCode::kIo, "cannot read", path);
    Item item;
    item.label = label;
    item.class_name = classes[static_cast<size_t>(label)];
    image_item(o, path, std::move(bytes), item);
    sink.add(i, item);
    if (progress && ((i + 1) % 64 == 0 || i + 1 == total)) progress(i + 1, total, sink.bytes());
  }
  sink.close_shard();
  return {sink.files(), total, sink.bytes()};
}

}  // namespace dataecho
