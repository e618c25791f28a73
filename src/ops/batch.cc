#include "dataecho/ops/batch.h"

#include <algorithm>
#include <cstring>

namespace dataecho {

Example collate(const std::vector<Example>& elements, const std::string& stage) {
  if (elements.empty()) throw_error(ErrorCode::kInternal, stage, "collate of no elements");
  const Example& first = elements.front();
  const int64_t n = static_cast<int64_t>(elements.size());
  Example out;
  std::vector<RowMeta> rows;
  rows.reserve(elements.size());
  for (const auto& e : elements) {
    if (e.is_batch())
      throw_error(ErrorCode::kInvalidArgument, stage,
                  "cannot batch a batch: put one `batch` per pipeline, or `unbatch` first",
                  e.describe());
    rows.push_back(e.row(0));
  }
  for (const auto& [name, t0] : first.fields()) {
    Shape shape;
    shape.reserve(t0.rank() + 1);
    shape.push_back(n);
    shape.insert(shape.end(), t0.shape().begin(), t0.shape().end());
    const size_t row_bytes = t0.nbytes();
    out.set(name, Tensor::make(t0.dtype(), std::move(shape), [&](std::byte* dst) {
              for (const auto& e : elements) {
                const Tensor* t = e.find(name);
                if (t == nullptr) {
                  throw_error(ErrorCode::kInvalidArgument, stage,
                              "field '" + name + "' is in element id " +
                                  std::to_string(first.id()) + " but missing in element id " +
                                  std::to_string(e.id()));
                }
                if (t->dtype() != t0.dtype() || t->shape() != t0.shape()) {
                  throw_error(ErrorCode::kInvalidArgument, stage,
                              "field '" + name + "' has " + dtype_name(t0.dtype()) + " shape " +
                                  shape_to_string(t0.shape()) + " in element id " +
                                  std::to_string(first.id()) + " but " + dtype_name(t->dtype()) +
                                  " shape " + shape_to_string(t->shape()) + " in element id " +
                                  std::to_string(e.id()) +
                                  "; resize or pad to one shape before batching");
                }
                if (row_bytes) std::memcpy(dst, t->raw_data(), row_bytes);
                dst += row_bytes;
              }
            }));
  }
  for (const auto& e : elements) {
    if (e.fields().size() != first.fields().size()) {
      for (const auto& [name, t] : e.fields()) {
        if (!first.find(name)) {
          throw_error(ErrorCode::kInvalidArgument, stage,
                      "field '" + name + "' is in element id " + std::to_string(e.id()) +
                          " but missing in element id " + std::to_string(first.id()));
        }
      }
    }
  }
  out.set_rows(std::move(rows));
  return out;
}

namespace {

class BatchDataset : public Dataset {
 public:
  BatchDataset(DatasetPtr input, BatchOptions o) : input_(std::move(input)), o_(o) {}
  std::string op_name() const override { return "batch"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), o_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, BatchOptions o) : in_(std::move(in)), o_(o) {
      pending_.reserve(o_.size);
    }
    void save(StateWriter& w) override {
      w.begin("batch");
      w.write_bool(done_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("batch");
      done_ = r.read_bool();
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      if (done_) return std::nullopt;
      pending_.clear();
      while (static_cast<int64_t>(pending_.size()) < o_.size) {
        auto e = in_->next();
        if (!e) {
          done_ = true;
          break;
        }
        pending_.push_back(std::move(*e));
      }
      if (pending_.empty() ||
          (o_.drop_remainder && static_cast<int64_t>(pending_.size()) < o_.size)) {
        pending_.clear();
        return std::nullopt;
      }
      Example b = collate(pending_, label());
      pending_.clear();
      count_rows(b);
      return b;
    }

   private:
    // Stats: "fresh_rows" (echo index 0) and "duplicate_rows" (rows whose source id
    // already appeared earlier in the same batch: what a shuffle after echo reduces).
    void count_rows(const Example& b) {
      if (!stats()) return;
      if (!fresh_rows_) {
        fresh_rows_ = &stats()->counter("fresh_rows");
        duplicate_rows_ = &stats()->counter("duplicate_rows");
      }
      ids_.clear();
      for (size_t i = 0; i < b.num_rows(); ++i) ids_.push_back(b.row(i).id);
      std::sort(ids_.begin(), ids_.end());
      int64_t dups = 0;
      for (size_t i = 1; i < ids_.size(); ++i) dups += ids_[i] == ids_[i - 1];
      fresh_rows_->fetch_add(static_cast<int64_t>(b.fresh_rows()), std::memory_order_relaxed);
      duplicate_rows_->fetch_add(dups, std::memory_order_relaxed);
    }

    std::unique_ptr<Iterator> in_;
    BatchOptions o_;
    std::vector<Example> pending_;
    bool done_ = false;
    std::vector<int64_t> ids_;
    std::atomic<int64_t>* fresh_rows_ = nullptr;
    std::atomic<int64_t>* duplicate_rows_ = nullptr;
  };

  DatasetPtr input_;
  BatchOptions o_;
};

}  // namespace

DatasetPtr make_batch(DatasetPtr input, const BatchOptions& o) {
  if (o.size < 1)
    throw_error(ErrorCode::kInvalidArgument, "batch",
                "size must be >= 1, got " + std::to_string(o.size));
  return std::make_shared<BatchDataset>(std::move(input), o);
}

}  // namespace dataecho
