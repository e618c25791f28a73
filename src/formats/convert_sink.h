// The shard writer behind convert_dataset (dataecho/formats/convert.h): records go to
// TFRecord or tar shards, split contiguously by record index, or to the directory
// layout. Private to the formats layer. Not thread-safe.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "dataecho/formats/convert.h"
#include "dataecho/formats/tfrecord.h"

namespace dataecho::convert_detail {

namespace fs = std::filesystem;

[[noreturn]] inline void convert_error(ErrorCode code, const std::string& why,
                                       const std::string& where) {
  throw Error(code, "convert", why, where);
}

struct Item {
  std::string bytes;  // encoded image
  std::string ext;    // "png" / "jpg"
  int64_t label = -1;
  std::string class_name;
  int height = 0, width = 0;
};

// Writes one output shard at a time.
class ShardSink {
 public:
  ShardSink(const ConvertOptions& o, int64_t total) : o_(o), total_(total) {}
  ~ShardSink() { close_shard(); }

  void add(int64_t index, const Item& item) {
    if (o_.to != "dir") open_shard_of(index);
    const std::string key = record_key(index);
    if (o_.to == "tfrecord") {
      Example e;
      e.set("image/encoded", Tensor::from_bytes(item.bytes));
      e.set("image/format", Tensor::from_bytes(item.ext == "jpg" ? "jpeg" : item.ext));
      e.set("image/class/label", Tensor::scalar<int64_t>(item.label));
      e.set("image/height", Tensor::scalar<int64_t>(item.height));
      e.set("image/width", Tensor::scalar<int64_t>(item.width));
      tfrecord_->write(serialize_tf_example(e));
    } else if (o_.to == "tar") {
      tar_entry(key + "." + item.ext, item.bytes);
      tar_entry(key + ".cls", std::to_string(item.label) + "\n");
    } else {
      fs::path dir = fs::path(o_.out_dir) / item.class_name;
      fs::create_directories(dir);
      fs::path path = dir / (key + "." + item.ext);
      std::ofstream out(path, std::ios::binary);
      out.write(item.bytes.data(), static_cast<std::streamsize>(item.bytes.size()));
      if (!out) convert_error(ErrorCode::kIo, "cannot write", path.string());
      bytes_ += static_cast<int64_t>(item.bytes.size());
      ++files_;
    }
  }
  // One text record: a tf.Example with the bytes feature "text", or the tar member
  // <key>.txt. `text` is a uint8 [n] tensor.
  void add_text(int64_t index, const Tensor& text) {
    open_shard_of(index);
    if (o_.to == "tfrecord") {
      Example e;
      e.set("text", text);
      tfrecord_->write(serialize_tf_example(e));
    } else {
      tar_entry(record_key(index) + ".txt", text.bytes());
    }
  }
  void close_shard() {
    if (tfrecord_) {
      tfrecord_->close();
      bytes_ += static_cast<int64_t>(tfrecord_->bytes());
      tfrecord_.reset();
    }
    if (tar_) {
      if (archive_write_close(tar_) != ARCHIVE_OK)
        convert_error(ErrorCode::kIo, archive_error_string(tar_), path_);
      archive_write_free(tar_);
      tar_ = nullptr;
      bytes_ += static_cast<int64_t>(fs::file_size(path_));
    }
  }
  int64_t files() const { return files_; }
  int64_t bytes() const {
    return bytes_ + (tfrecord_ ? static_cast<int64_t>(tfrecord_->bytes()) : 0);
  }

 private:
  // The shard of record `index` (contiguous, even split), opened if it is not open.
  void open_shard_of(int64_t index) {
    int shard = static_cast<int>(index * o_.shards / std::max<int64_t>(total_, 1));
    if (shard != current_) open_shard(shard);
  }
  static std::string record_key(int64_t index) {
    char key[32];
    std::snprintf(key, sizeof key, "%08lld", static_cast<long long>(index));
    return key;
  }
  void open_shard(int shard) {
    close_shard();
    current_ = shard;
    char name[64];
    if (o_.to == "tfrecord") {
      std::snprintf(name, sizeof name, "-%05d-of-%05d.tfrecord", shard, o_.shards);
      path_ = (fs::path(o_.out_dir) / (o_.name + name)).string();
      tfrecord_ = std::make_unique<TfRecordWriter>(path_);
    } else {
      std::snprintf(name, sizeof name, "-%05d.tar", shard);
      path_ = (fs::path(o_.out_dir) / (o_.name + name)).string();
      tar_ = archive_write_new();
      archive_write_set_format_ustar(tar_);
      if (archive_write_open_filename(tar_, path_.c_str()) != ARCHIVE_OK) {
        std::string why = archive_error_string(tar_);
        archive_write_free(tar_);
        tar_ = nullptr;
        convert_error(ErrorCode::kIo, "cannot create: " + why, path_);
      }
    }
    ++files_;
  }
  void tar_entry(const std::string& name, std::string_view bytes) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_mtime(e, 0, 0);  // the same input gives the same bytes
    bool ok = archive_write_header(tar_, e) == ARCHIVE_OK &&
              archive_write_data(tar_, bytes.data(), bytes.size()) ==
                  static_cast<la_ssize_t>(bytes.size());
    archive_entry_free(e);
    if (!ok) convert_error(ErrorCode::kIo, archive_error_string(tar_), path_);
  }

  const ConvertOptions& o_;
  int64_t total_;
  int current_ = -1;
  std::string path_;
  std::unique_ptr<TfRecordWriter> tfrecord_;
  struct archive* tar_ = nullptr;
  int64_t files_ = 0, bytes_ = 0;
};

// Text files into shards (convert_text.cc).
ConvertSummary convert_text(const ConvertOptions& o,
                            const std::function<void(int64_t, int64_t, int64_t)>& progress);

}  // namespace dataecho::convert_detail
