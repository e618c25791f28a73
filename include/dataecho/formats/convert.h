// Dataset conversion behind `dataecho convert`: IDX files or a `class_name/file.jpg`
// directory into TFRecord shards, WebDataset tar shards or that directory layout; text
// files (lines, documents between separators, or one field of JSON Lines) into TFRecord
// or tar shards.
// Not thread-safe (one conversion per call); errors are dataecho::Error values naming
// the input or output file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dataecho {

struct ConvertOptions {
  // Input: IDX (`idx_images`, optional `idx_labels`) or a directory `input_dir` whose
  // subdirectories are classes (sorted names -> labels 0, 1, ...), holding .jpg/.jpeg/.png.
  std::string idx_images, idx_labels, input_dir;
  int64_t limit = -1;  // first N examples only

  // Text input: files read by the `text` source (dataecho/formats/text.h: paths, globs,
  // brace ranges, @manifests; gzip inflated), one record per line, per document between
  // `separator`s, or per JSON Lines object (`jsonl`: its string key `field`). Each record
  // is written as a tf.Example with the bytes feature "text", or as a tar member
  // <8-digit record index>.txt; empty records are skipped, as the source skips them. The
  // input is read twice (counted, then written), so shards split evenly and a bad record
  // (invalid UTF-8, longer than `max_bytes`) fails the run before anything is written.
  std::vector<std::string> text;
  std::string separator = "\n";
  bool jsonl = false;
  std::string field = "text";
  int64_t max_bytes = 1 << 20;

  std::string to = "tfrecord";  // "tfrecord", "tar" or "dir"
  std::string out_dir;
  std::string name = "data";  // shard files: <name>-00000-of-00008.tfrecord / <name>-00000.tar
  int shards = 1;
  // Image encoding: "png" or "jpeg"; "" keeps directory inputs' bytes as they are (IDX
  // inputs default to png). `resize` > 0 scales every image to resize x resize;
  // `channels` 3 turns grayscale into RGB (an ImageNet-like decode workload).
  std::string encode;
  int quality = 90;
  int resize = 0;
  int channels = 0;
};

struct ConvertSummary {
  int64_t files = 0;
  int64_t records = 0;
  int64_t bytes = 0;
};

// `progress(records_done, records_total, bytes_written)` is called now and then.
ConvertSummary convert_dataset(const ConvertOptions& options,
                               const std::function<void(int64_t, int64_t, int64_t)>& progress = {});

}  // namespace dataecho
