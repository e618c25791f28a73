// What the multi-file sources (tfrecord, tar) share: one dataset per file, in the
// given order, under a source node with shards() (so that `interleave` and file-level
// `shard` can split it), and the checks on the file list. Each file's dataset numbers
// its records; file_record_id (formats/tfrecord.h) makes the stable ids
// (file << 40) | record, hence at most 2^23 files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/ops/sources.h"

namespace dataecho {

// One file of such a source: its options (shared by all files), its index and its uri.
template <class Options>
class FileDatasetBase : public Dataset {
 public:
  FileDatasetBase(std::shared_ptr<const Options> o, int64_t shard, std::string uri)
      : o_(std::move(o)), shard_(shard), uri_(std::move(uri)) {}

  // The head of a file iterator's state: its tag (the op's name) and the file's index,
  // checked on restore ("saved state is of another shard", naming the file).
  void save_head(StateWriter& w) const {
    w.begin(op_name());
    w.write_i64(shard_);
  }
  void restore_head(StateReader& r, const std::string& label) const {
    r.expect(op_name());
    if (r.read_i64() != shard_)
      throw_error(ErrorCode::kInvalidArgument, label, "saved state is of another shard", uri_);
  }

 protected:
  std::shared_ptr<const Options> o_;
  int64_t shard_;  // the file's index: the high bits of its records' ids
  std::string uri_;
};

// FileDataset(std::shared_ptr<const Options>, int64_t file_index, std::string uri).
template <class FileDataset, class Options>
DatasetPtr make_file_source(const std::string& kind, const Options& o) {
  if (o.uris.empty()) throw_error(ErrorCode::kInvalidArgument, kind, "no files given");
  if (o.uris.size() >= (size_t{1} << (63 - kShardIdShift))) {
    throw_error(ErrorCode::kInvalidArgument, kind,
                std::to_string(o.uris.size()) + " files: too many for stable ids (at most " +
                    std::to_string((size_t{1} << (63 - kShardIdShift)) - 1) + ")");
  }
  auto shared = std::make_shared<const Options>(o);
  std::vector<std::shared_ptr<Dataset>> files;
  files.reserve(o.uris.size());
  for (size_t i = 0; i < o.uris.size(); ++i)
    files.push_back(std::make_shared<FileDataset>(shared, static_cast<int64_t>(i), o.uris[i]));
  return make_sharded_source(kind, std::move(files));
}

}  // namespace dataecho
