#include "dataecho/ops/basic.h"
#include "dataecho/ops/sources.h"
#include "position_filter.h"

namespace dataecho {
namespace {

// File-level sharding: a source restricted to its own files, still with shards() so
// that an `interleave` can follow.
class FileShardDataset : public Dataset {
 public:
  explicit FileShardDataset(std::vector<DatasetPtr> parts)
      : parts_(std::move(parts)), whole_(make_concatenate(parts_)) {}
  std::string op_name() const override { return "shard"; }
  std::vector<DatasetPtr> shards() const override { return parts_; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return whole_->make_iterator(ctx);
  }

 private:
  std::vector<DatasetPtr> parts_;
  DatasetPtr whole_;
};

// A source's own share (Dataset::shard_of), as the `shard` node.
class SourceShareDataset : public Dataset {
 public:
  explicit SourceShareDataset(DatasetPtr share) : share_(std::move(share)) {}
  std::string op_name() const override { return "shard"; }
  std::vector<DatasetPtr> shards() const override { return share_->shards(); }
  DatasetPtr shard_of(int64_t num_shards, int64_t index) const override {
    return share_->shard_of(num_shards, index);
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return share_->make_iterator(ctx);
  }

 private:
  DatasetPtr share_;
};

}  // namespace

DatasetPtr make_shard(DatasetPtr input, int64_t num_shards, int64_t index) {
  if (num_shards < 1)
    throw_error(ErrorCode::kInvalidArgument, "shard",
                "num_shards must be >= 1, got " + std::to_string(num_shards));
  if (index < 0 || index >= num_shards) {
    throw_error(
        ErrorCode::kInvalidArgument, "shard",
        "index must be in [0, " + std::to_string(num_shards) + "), got " + std::to_string(index));
  }
  if (DatasetPtr share = input->shard_of(num_shards, index))
    return std::make_shared<SourceShareDataset>(std::move(share));
  auto files = input->shards();
  if (static_cast<int64_t>(files.size()) >= num_shards) {
    std::vector<DatasetPtr> mine;
    for (size_t i = static_cast<size_t>(index); i < files.size();
         i += static_cast<size_t>(num_shards))
      mine.push_back(files[i]);
    return std::make_shared<FileShardDataset>(std::move(mine));
  }
  // Elements: every num_shards-th from position `index` on. Saved: the position.
  PositionRule rule;
  rule.op = "shard";
  rule.verdict = [num_shards, index](int64_t p) {
    return p % num_shards == index ? PositionVerdict::kPass : PositionVerdict::kDrop;
  };
  return make_position_filter(std::move(input), std::move(rule));
}

}  // namespace dataecho
