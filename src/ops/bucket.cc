#include "dataecho/ops/bucket.h"

#include <algorithm>

#include "batch_builder.h"
#include "unary_dataset.h"

namespace dataecho {
namespace {

class BucketIt : public Iterator {
 public:
  BucketIt(std::unique_ptr<Iterator> in, const BucketOptions* o)
      : in_(std::move(in)),
        o_(o),
        buckets_(o->boundaries.size() + 1),
        longest_(buckets_.size(), 0) {}
  void save(StateWriter& w) override {
    w.begin("bucket");
    for (const auto& bucket : buckets_) {
      w.write_u64(bucket.size());
      for (const Example& e : bucket) w.write_example(e);
    }
    w.write_bool(ended_);
    w.write_u64(flush_);
    in_->save(w);
  }
  void restore(StateReader& r) override {
    r.expect("bucket");
    for (size_t b = 0; b < buckets_.size(); ++b) {
      buckets_[b].clear();
      longest_[b] = 0;
      const uint64_t n = r.read_u64();
      for (uint64_t i = 0; i < n; ++i) add(b, r.read_example());
    }
    ended_ = r.read_bool();
    flush_ = r.read_u64();
    in_->restore(r);
  }

 protected:
  std::optional<Example> next_impl() override {
    while (!ended_) {
      auto e = in_->next();
      if (!e) {
        ended_ = true;
        break;
      }
      const int64_t len = length_of(*e);
      const size_t b =
          static_cast<size_t>(std::upper_bound(o_->boundaries.begin(), o_->boundaries.end(), len) -
                              o_->boundaries.begin());
      const int64_t rows = static_cast<int64_t>(buckets_[b].size());
      if (o_->token_budget > 0 && rows > 0 &&
          (rows + 1) * std::max(longest_[b], len) > o_->token_budget) {
        Example out = emit(b);
        add(b, std::move(*e));
        return out;
      }
      add(b, std::move(*e));
      const int64_t full = o_->token_budget > 0 ? o_->token_budget : o_->batch_sizes[b];
      const int64_t used =
          static_cast<int64_t>(buckets_[b].size()) * (o_->token_budget > 0 ? longest_[b] : 1);
      if (used >= full) return emit(b);
    }
    if (o_->drop_remainder) return std::nullopt;
    for (; flush_ < buckets_.size(); ++flush_)
      if (!buckets_[flush_].empty()) return emit(flush_);
    return std::nullopt;
  }

 private:
  int64_t length_of(const Example& e) const {
    const Tensor& t = e.get(o_->field);
    if (t.rank() < 1 || e.is_batch())
      throw_error(ErrorCode::kInvalidArgument, label(),
                  "field '" + o_->field + "' has shape " + shape_to_string(t.shape()) +
                      (e.is_batch() ? " in a batch" : "") +
                      ": bucket takes single elements with a length (a first dimension)",
                  e.describe());
    return t.shape()[0];
  }
  void add(size_t b, Example e) {
    longest_[b] = std::max(longest_[b], length_of(e));
    buckets_[b].push_back(std::move(e));
  }
  Example emit(size_t b) {
    int64_t pads = 0, values = 0;
    Example out = pad_and_collate(buckets_[b], o_->pad, label(), &pads, &values);
    buckets_[b].clear();
    longest_[b] = 0;
    rows_.count(stats(), out);
    if (stats()) {
      stats()->counter("pad_elements") += pads;
      stats()->counter("value_elements") += values;
    }
    return out;
  }

  std::unique_ptr<Iterator> in_;
  const BucketOptions* o_;
  std::vector<std::vector<Example>> buckets_;
  std::vector<int64_t> longest_;
  bool ended_ = false;
  size_t flush_ = 0;  // at the end: the next bucket to emit
  BatchRowStats rows_;
};

}  // namespace

DatasetPtr make_bucket(DatasetPtr input, const BucketOptions& o) {
  auto fail = [](const std::string& message) {
    throw_error(ErrorCode::kInvalidArgument, "bucket", message);
  };
  for (size_t i = 0; i < o.boundaries.size(); ++i) {
    if (o.boundaries[i] < 1 || (i > 0 && o.boundaries[i] <= o.boundaries[i - 1]))
      fail("boundaries must be increasing and >= 1");
  }
  if ((o.token_budget > 0) == !o.batch_sizes.empty())
    fail("give batch_sizes (one per bucket) or a token_budget, one of them");
  if (!o.batch_sizes.empty() && o.batch_sizes.size() != o.boundaries.size() + 1)
    fail(std::to_string(o.boundaries.size()) + " boundaries make " +
         std::to_string(o.boundaries.size() + 1) + " buckets, but " +
         std::to_string(o.batch_sizes.size()) + " batch sizes are given");
  for (int64_t s : o.batch_sizes)
    if (s < 1) fail("batch sizes must be >= 1, got " + std::to_string(s));
  return std::make_shared<UnaryDataset<BucketOptions, BucketIt>>("bucket", std::move(input), o);
}

}  // namespace dataecho
