#include "dataecho/ops/basic.h"
#include "dataecho/ops/sources.h"

namespace dataecho {
namespace {

class ShardDataset : public Dataset {
 public:
  ShardDataset(DatasetPtr input, int64_t n, int64_t index)
      : input_(std::move(input)), n_(n), index_(index) {}
  std::string op_name() const override { return "shard"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), n_, index_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, int64_t n, int64_t index)
        : in_(std::move(in)), n_(n), index_(index) {}
    void save(StateWriter& w) override {
      w.begin("shard");
      w.write_i64(pos_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("shard");
      pos_ = r.read_i64();
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      while (auto e = in_->next()) {
        int64_t p = pos_++;
        if (p % n_ == index_) return e;
      }
      return std::nullopt;
    }

   private:
    std::unique_ptr<Iterator> in_;
    int64_t n_, index_, pos_ = 0;
  };

  DatasetPtr input_;
  int64_t n_, index_;
};

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
  auto files = input->shards();
  if (static_cast<int64_t>(files.size()) >= num_shards) {
    std::vector<DatasetPtr> mine;
    for (size_t i = static_cast<size_t>(index); i < files.size();
         i += static_cast<size_t>(num_shards))
      mine.push_back(files[i]);
    return std::make_shared<FileShardDataset>(std::move(mine));
  }
  return std::make_shared<ShardDataset>(std::move(input), num_shards, index);
}

}  // namespace dataecho
