#include "dataecho/ops/batch.h"

#include <algorithm>
#include <cstring>

#include "batch_builder.h"
#include "map_and_batch.h"

namespace dataecho {

// ---- BatchBuilder ----

BatchBuilder::BatchBuilder(int64_t capacity, std::string stage)
    : capacity_(std::max<int64_t>(capacity, 1)), stage_(std::move(stage)) {}

BatchBuilder::BatchBuilder(int64_t capacity, std::string stage, RowPlacer* placer,
                           int64_t batch_index)
    : capacity_(std::max<int64_t>(capacity, 1)),
      stage_(std::move(stage)),
      placer_(placer),
      batch_index_(batch_index) {}

// With a placer: the column the map computes in place (chosen from the first batch's
// first element) takes the placer's buffer for this batch.
void BatchBuilder::place_column() {
  auto unique = [&](const Column& c) {
    return std::count_if(columns_.begin(), columns_.end(), [&](const Column& o) {
             return o.dtype == c.dtype && o.shape == c.shape;
           }) == 1;
  };
  if (!placer_->has_column()) {
    const Column* best = nullptr;
    for (const Column& c : columns_) {
      if (c.row_bytes >= RowPlacer::kMinRowBytes && unique(c) &&
          (best == nullptr || c.row_bytes > best->row_bytes))
        best = &c;
    }
    if (best == nullptr) return;
    placer_->set_column(best->dtype, best->shape);
  }
  for (Column& c : columns_) {
    if (placer_->is_column(c.dtype, c.shape) && unique(c)) {
      c.buffer = placer_->batch_buffer(batch_index_);
      c.placed = true;
      return;
    }
  }
}

void BatchBuilder::add(const Example& e) {
  if (e.is_batch())
    throw_error(ErrorCode::kInvalidArgument, stage_,
                "cannot batch a batch: put one `batch` per pipeline, or `unbatch` first",
                e.describe());
  if (size() >= capacity_)
    throw_error(ErrorCode::kInternal, stage_,
                "batch of " + std::to_string(capacity_) + " rows is full");
  if (rows_.empty()) {
    first_id_ = e.id();
    columns_.clear();
    columns_.reserve(e.fields().size());
    for (const auto& [name, t] : e.fields()) {
      Column c;
      c.name = name;
      c.dtype = t.dtype();
      c.shape = t.shape();
      c.row_bytes = t.nbytes();
      columns_.push_back(std::move(c));
    }
    if (placer_ != nullptr) place_column();
    for (Column& c : columns_)
      if (!c.buffer) c.buffer = Buffer::allocate(c.row_bytes * static_cast<size_t>(capacity_));
  } else {
    // Everything is checked before anything of this element is copied.
    for (const Column& c : columns_) {
      const Tensor* t = e.find(c.name);
      if (t == nullptr)
        throw_error(ErrorCode::kInvalidArgument, stage_,
                    "field '" + c.name + "' is in element id " + std::to_string(first_id_) +
                        " but missing in element id " + std::to_string(e.id()));
      if (t->dtype() != c.dtype || t->shape() != c.shape)
        throw_error(ErrorCode::kInvalidArgument, stage_,
                    "field '" + c.name + "' has " + dtype_name(c.dtype) + " shape " +
                        shape_to_string(c.shape) + " in element id " + std::to_string(first_id_) +
                        " but " + dtype_name(t->dtype()) + " shape " + shape_to_string(t->shape()) +
                        " in element id " + std::to_string(e.id()) +
                        "; resize to one shape, or use padded_batch for fields of varying length");
    }
    if (e.fields().size() != columns_.size()) {
      for (const auto& field : e.fields()) {
        const std::string& name = field.first;  // (clang 14 cannot capture a binding)
        const bool known = std::any_of(columns_.begin(), columns_.end(),
                                       [&](const Column& c) { return c.name == name; });
        if (!known)
          throw_error(ErrorCode::kInvalidArgument, stage_,
                      "field '" + name + "' is in element id " + std::to_string(e.id()) +
                          " but missing in element id " + std::to_string(first_id_));
      }
    }
  }
  const size_t row = rows_.size();
  for (Column& c : columns_) {
    if (c.row_bytes == 0) continue;
    const Tensor& t = *e.find(c.name);
    std::byte* dst = c.buffer->mutable_data() + row * c.row_bytes;
    if (c.placed) {
      if (t.raw_data() == dst) {
        ++placed_rows_;  // computed in place by the map
        continue;
      }
      // Output k of the map is row k of this numbering by construction; anything else
      // would mean a row of this batch holds an element not yet added. A placer whose
      // rows may move (the elastic merge's forecast) has its misplaced rows copied: they
      // only move to rows before their own, whose elements are already added.
      if (!placer_->rows_may_move() && t.buffer() != nullptr && placer_->holds(t.buffer().get()))
        throw_error(ErrorCode::kInternal, stage_,
                    "map-and-batch fusion: field '" + c.name + "' of element id " +
                        std::to_string(e.id()) + " is not in its row",
                    e.describe());
    }
    std::memcpy(dst, t.raw_data(), c.row_bytes);
  }
  rows_.push_back(e.row(0));
}

Example BatchBuilder::finish() {
  if (rows_.empty()) throw_error(ErrorCode::kInternal, stage_, "collate of no elements");
  const int64_t n = size();
  Example out;
  for (Column& c : columns_) {
    Shape shape;
    shape.reserve(c.shape.size() + 1);
    shape.push_back(n);
    shape.insert(shape.end(), c.shape.begin(), c.shape.end());
    // A last batch smaller than the capacity views the first n rows of its buffers.
    out.set(c.name, Tensor(c.dtype, std::move(shape), std::move(c.buffer)));
  }
  out.set_rows(std::move(rows_));
  rows_.clear();
  columns_.clear();
  return out;
}

Example collate(const std::vector<Example>& elements, const std::string& stage) {
  if (elements.empty()) throw_error(ErrorCode::kInternal, stage, "collate of no elements");
  BatchBuilder b(static_cast<int64_t>(elements.size()), stage);
  for (const auto& e : elements) b.add(e);
  return b.finish();
}

void BatchRowStats::count(NodeStats* stats, const Example& b) {
  if (!stats) return;
  if (!fresh_rows_) {
    fresh_rows_ = &stats->counter("fresh_rows");
    duplicate_rows_ = &stats->counter("duplicate_rows");
  }
  ids_.clear();
  for (size_t i = 0; i < b.num_rows(); ++i) ids_.push_back(b.row(i).id);
  std::sort(ids_.begin(), ids_.end());
  int64_t dups = 0;
  for (size_t i = 1; i < ids_.size(); ++i) dups += ids_[i] == ids_[i - 1];
  fresh_rows_->fetch_add(static_cast<int64_t>(b.fresh_rows()), std::memory_order_relaxed);
  duplicate_rows_->fetch_add(dups, std::memory_order_relaxed);
}

namespace {

class BatchDataset : public Dataset {
 public:
  // fused: the input is a map that keeps order (fuse_map_and_batch checked it).
  BatchDataset(DatasetPtr input, BatchOptions o, bool fused = false)
      : input_(std::move(input)), o_(o), fused_(fused) {}
  std::string op_name() const override { return "batch"; }
  const DatasetPtr& input() const { return input_; }
  const BatchOptions& options() const { return o_; }
  bool fused() const { return fused_; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    auto in = input_->make_iterator(ctx);
    std::shared_ptr<RowPlacer> placer;
    if (fused_) {
      auto* placing = dynamic_cast<RowPlacingIterator*>(in.get());
      if (placing == nullptr)
        throw_error(ErrorCode::kInternal, label(), "fused batch over a node that places no rows");
      placer = std::make_shared<RowPlacer>(o_.size);
      placing->set_row_placer(placer);
    }
    return std::make_unique<It>(std::move(in), o_, std::move(placer));
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, BatchOptions o, std::shared_ptr<RowPlacer> placer)
        : in_(std::move(in)), o_(o), placer_(std::move(placer)) {}
    void save(StateWriter& w) override {
      w.begin("batch");
      w.write_bool(done_);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("batch");
      done_ = r.read_bool();
      in_->restore(r);  // a fused map numbers its outputs from 0 again (RowPlacer::reset)
      batch_index_ = 0;
    }

   protected:
    std::optional<Example> next_impl() override {
      if (done_) return std::nullopt;
      // Each element is copied into the batch as it arrives and dropped right after
      // (or, fused with a map, found in its row already).
      BatchBuilder b = placer_ ? BatchBuilder(o_.size, label(), placer_.get(), batch_index_)
                               : BatchBuilder(o_.size, label());
      while (b.size() < o_.size) {
        auto e = in_->next();
        if (!e) {
          done_ = true;
          break;
        }
        b.add(*e);
      }
      if (placer_) placer_->finish_batch(batch_index_++);
      if (b.size() == 0 || (o_.drop_remainder && b.size() < o_.size)) return std::nullopt;
      if (stats() && b.placed_rows() > 0) {
        if (!placed_rows_) placed_rows_ = &stats()->counter("placed_rows");
        placed_rows_->fetch_add(b.placed_rows(), std::memory_order_relaxed);
      }
      Example out = b.finish();
      rows_.count(stats(), out);
      return out;
    }

   private:
    std::unique_ptr<Iterator> in_;
    BatchOptions o_;
    std::shared_ptr<RowPlacer> placer_;  // set when fused with the map below
    int64_t batch_index_ = 0;            // the placer's numbering
    std::atomic<int64_t>* placed_rows_ = nullptr;
    bool done_ = false;
    BatchRowStats rows_;
  };

  DatasetPtr input_;
  BatchOptions o_;
  bool fused_ = false;
};

}  // namespace

DatasetPtr fuse_map_and_batch(const DatasetPtr& node) {
  const auto* batch = dynamic_cast<const BatchDataset*>(node.get());
  if (batch == nullptr || batch->fused()) return node;
  const auto* map = dynamic_cast<const RowPlacingDataset*>(batch->input().get());
  if (map == nullptr || !map->keeps_order()) return node;
  return std::make_shared<BatchDataset>(batch->input(), batch->options(), true);
}

DatasetPtr make_batch(DatasetPtr input, const BatchOptions& o) {
  if (o.size < 1)
    throw_error(ErrorCode::kInvalidArgument, "batch",
                "size must be >= 1, got " + std::to_string(o.size));
  return std::make_shared<BatchDataset>(std::move(input), o);
}

}  // namespace dataecho
