#include "dataecho/ops/sources.h"

#include "sequence_iterator.h"

namespace dataecho {
namespace {

// Reads `parts` (owned by the dataset, which outlives the iterator) one after another.
std::unique_ptr<Iterator> concat_iterator(const std::vector<DatasetPtr>& parts,
                                          const IteratorContext& ctx) {
  return std::make_unique<SequenceIt>(
      "concatenate", "shard index", parts.size(), [&parts](size_t i) { return parts[i]; }, ctx);
}

class ConcatenateDataset : public Dataset {
 public:
  explicit ConcatenateDataset(std::vector<DatasetPtr> parts) : parts_(std::move(parts)) {}
  std::string op_name() const override { return "concatenate"; }
  std::vector<DatasetPtr> shards() const override { return parts_; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return concat_iterator(parts_, ctx);
  }

 private:
  std::vector<DatasetPtr> parts_;
};

class ShardedSourceDataset : public Dataset {
 public:
  ShardedSourceDataset(std::string op_name, std::vector<std::shared_ptr<Dataset>> shards)
      : op_name_(std::move(op_name)), mutable_shards_(std::move(shards)) {
    shards_.assign(mutable_shards_.begin(), mutable_shards_.end());
  }
  std::string op_name() const override { return op_name_; }
  std::vector<DatasetPtr> shards() const override { return shards_; }
  bool counts_elements() const override { return false; }  // the shards count them
  // Each shard says for itself: the first that cannot gives the reason.
  std::string not_seekable_reason() const override {
    for (const auto& s : shards_) {
      std::string why = s->not_seekable_reason();
      if (!why.empty()) return why;
    }
    return "";
  }
  std::vector<ShardIndex> record_index() const override {
    std::vector<ShardIndex> out;
    for (const auto& s : shards_) {
      std::vector<ShardIndex> one = s->record_index();
      out.insert(out.end(), std::make_move_iterator(one.begin()),
                 std::make_move_iterator(one.end()));
    }
    return out;
  }
  // The shard's own range (its shards check the rest, knowing their record counts).
  DatasetPtr record_range(const RecordRange& r) const override {
    check_record_range(label(), r, static_cast<int64_t>(shards_.size()), -1);
    return shards_[static_cast<size_t>(r.shard)]->record_range(r);
  }
  void attach(std::string label, std::shared_ptr<NodeStats> stats) override {
    for (auto& s : mutable_shards_) s->attach(label, stats);
    Dataset::attach(std::move(label), std::move(stats));
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return concat_iterator(shards_, ctx);
  }

 private:
  std::string op_name_;
  std::vector<std::shared_ptr<Dataset>> mutable_shards_;  // for attach()
  std::vector<DatasetPtr> shards_;
};

}  // namespace

DatasetPtr make_concatenate(std::vector<DatasetPtr> parts) {
  return std::make_shared<ConcatenateDataset>(std::move(parts));
}

DatasetPtr make_sharded_source(std::string op_name, std::vector<std::shared_ptr<Dataset>> shards) {
  return std::make_shared<ShardedSourceDataset>(std::move(op_name), std::move(shards));
}

}  // namespace dataecho
