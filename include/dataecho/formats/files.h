// The `files` source: one element per file, read directly, from
//   * an ImageFolder tree (`root`): class = subfolder of the root, classes sorted by name
//     (bytewise, which is Python's sorted() of the names) and numbered 0, 1, ... exactly
//     as torchvision.datasets.ImageFolder does; each class folder searched recursively;
//     files kept by extension (default torchvision's IMG_EXTENSIONS, case-insensitive);
//     the order is torchvision's: class by class, folders in sorted(os.walk()) order,
//     file names sorted within a folder;
//   * a glob or brace pattern (`uri`, as the other sources take it: expand_uris); no label;
//   * a list file (`list`, CSV or TSV, local or http(s)): path, then label, then further
//     columns kept as string fields (uint8 bytes); paths relative to `base` when given,
//     else to the list's own folder (or URL directory). The list's order is kept.
// Each element: "image" (the file's bytes, uint8 [n], as the tar source gives a file, so
// decode_image and decode_augment read it), "label" (int64 scalar; absent for a glob),
// and a list's further columns. Its id is its index in the listing (stable).
//
// The listing is made once, when the source is built. It holds each path relative to the
// listing's root in one string arena (path, then a list's further cells, separated by
// '\0') with a uint32 offset, a size (int64, -1 where unknown: http) and a label (int64):
// 20 bytes per file plus its relative path and cells ("n01440764/n01440764_10026.JPEG":
// 51 bytes in all). Local files are stat()ed while listing.
// A saved state holds the listing's hash (FNV-1a of the relative paths, cells and
// labels) and the position, never the paths: a restore refuses, naming both counts, a
// listing that differs from the one the state was saved from. A file that is missing,
// unreadable or of another size than listed when it is read follows `on_error` (fail,
// skip, echo), its path in the message.
//
// Reads: `reads_in_flight` threads (default 8) read files ahead of the consumer, each a
// blocking open/read (or an HTTP GET); the output order is the listing's whatever
// finishes first. Buffers at most 2 x reads_in_flight files' bytes. With 1, files are
// read on the consumer's thread.
// Sharding: `shard` right after this source splits the listing itself (every k-th file,
// Dataset::shard_of), with the parallel reads kept; `interleave` gets up to 64 strided
// parts from shards().
// Thread-safety: the dataset is immutable; one consumer per iterator.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataecho/core/dataset.h"
#include "dataecho/formats/on_error.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

// torchvision.datasets.folder.IMG_EXTENSIONS
const std::vector<std::string>& image_extensions();

struct FilesOptions {
  // Exactly one of root, uris, list.
  std::string root;               // an ImageFolder tree (a local folder)
  std::vector<std::string> uris;  // paths, globs, brace patterns, URLs (expand_uris)
  std::string list;               // a CSV or TSV list file, local, http(s) or s3://
  std::string base;               // list only: what relative paths are relative to
  char delimiter = 0;             // list only; 0: tab for .tsv/.tab, else ','
  // list only: whether the first row names the columns; unset: it does when its second
  // cell is not an integer.
  std::optional<bool> header;
  std::vector<std::string> extensions = image_extensions();  // root only; empty: every file
  bool allow_empty = false;  // root only: a class folder without files (torchvision refuses)
  std::string base_dir;      // relative root / list / uri paths are relative to this
  int64_t reads_in_flight = 8;
  OnError on_error = OnError::kFail;
  StreamOptions stream;  // for http(s) files and lists
  // Also each file's path as field "path" (uint8 bytes): relative to the root, or as
  // the list or pattern gives it.
  bool path_field = false;
};

// The listing of FilesOptions (see above). Immutable once made.
class FileListing {
 public:
  static std::shared_ptr<const FileListing> make(const FilesOptions& options);

  size_t size() const { return sizes_.size(); }
  // Relative to root() unless absolute (a list's "/x.jpg") or a URL.
  std::string_view path(size_t i) const;
  std::string full_path(size_t i) const;
  int64_t file_size(size_t i) const { return sizes_[i]; }  // -1: unknown
  bool has_labels() const { return !labels_.empty(); }
  int64_t label(size_t i) const { return labels_[i]; }
  // A list's further columns: their names, and row i's cell c.
  const std::vector<std::string>& columns() const { return columns_; }
  std::string_view cell(size_t i, size_t c) const;
  const std::vector<std::string>& classes() const { return classes_; }  // ImageFolder
  const std::string& root() const { return root_; }
  uint64_t hash() const { return hash_; }
  size_t memory_bytes() const;  // what the listing holds

 private:
  friend class FileListingBuilder;
  std::string root_;  // "/data/train/", "http://host/data/" or ""
  std::string arena_;
  std::vector<uint32_t> offsets_;  // size() + 1
  std::vector<int64_t> sizes_;
  std::vector<int64_t> labels_;
  std::vector<std::string> columns_;
  std::vector<std::string> classes_;
  uint64_t hash_ = 0;
};

// The class folders of an ImageFolder root, sorted: class i is classes[i]
// (torchvision's find_classes). Throws kNotFound naming the root when it has none.
std::vector<std::string> image_folder_classes(const std::string& root);
// torchvision's class_to_idx: class name -> label.
std::map<std::string, int64_t> class_to_idx(const std::string& root);

DatasetPtr make_files_source(const FilesOptions& options);

}  // namespace dataecho
