#include "dataecho/ops/padded_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "batch_builder.h"
#include "unary_dataset.h"

namespace dataecho {
namespace {

// One output field of a padded batch.
struct Column {
  std::string name;
  const PadField* pad = nullptr;  // null: not padded (every row the same shape)
  DType dtype{};
  Shape shape;            // the first element's
  size_t step_bytes = 0;  // bytes per index of the first dimension (padded fields)
  int64_t slot = 0;       // padded fields: the length of every row's slot
  int64_t longest = 0;
};

std::string element_id(const Example& e) { return "element id " + std::to_string(e.id()); }

[[noreturn]] void fail(const std::string& stage, const std::string& message, const Example& e) {
  throw_error(ErrorCode::kInvalidArgument, stage, message, e.describe());
}

// Whether `value` converts to `dtype` exactly (an integer type: a whole number in range).
bool representable(DType dtype, double value) {
  auto in = [&](double lo, double hi) {
    return value == std::floor(value) && value >= lo && value <= hi;
  };
  switch (dtype) {
    case DType::kUInt8:
      return in(0, 255);
    case DType::kInt32:
      return in(INT32_MIN, INT32_MAX);
    case DType::kInt64:
      return in(-9.2233720368547758e18, 9.2233720368547748e18);
    case DType::kFloat32:
    case DType::kFloat64:
      break;
  }
  return true;
}

void fill_value(std::byte* dst, DType dtype, double value, int64_t count) {
  if (count <= 0) return;
  if (value == 0) {
    std::memset(dst, 0, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  auto fill = [&](auto v) {
    for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * sizeof(v), &v, sizeof(v));
  };
  switch (dtype) {
    case DType::kUInt8:
      std::memset(dst, static_cast<uint8_t>(value), static_cast<size_t>(count));
      break;
    case DType::kInt32:
      fill(static_cast<int32_t>(value));
      break;
    case DType::kInt64:
      fill(static_cast<int64_t>(value));
      break;
    case DType::kFloat32:
      fill(static_cast<float>(value));
      break;
    case DType::kFloat64:
      fill(value);
      break;
  }
}

// The columns of the first element, each with its padding.
std::vector<Column> plan_columns(const Example& first, const PadOptions& o,
                                 std::vector<PadField>& defaults, const std::string& stage) {
  for (const PadField& p : o.fields)
    if (first.find(p.name) == nullptr)
      fail(stage, "padded field '" + p.name + "' is not in " + element_id(first), first);
  std::vector<Column> columns;
  defaults.reserve(first.fields().size());
  for (const auto& [name, t] : first.fields()) {
    Column c;
    c.name = name;
    c.dtype = t.dtype();
    c.shape = t.shape();
    if (o.fields.empty()) {
      if (t.rank() >= 1) c.pad = &defaults.emplace_back(PadField{name});
    } else {
      for (const PadField& p : o.fields)
        if (p.name == name) c.pad = &p;
    }
    if (c.pad != nullptr) {
      if (t.rank() == 0)
        fail(stage, "padded field '" + name + "' is a scalar in " + element_id(first), first);
      if (!representable(c.dtype, c.pad->value))
        fail(stage,
             "the pad value " + nlohmann::json(c.pad->value).dump() + " of field '" + name +
                 "' does not fit its dtype, " + dtype_name(c.dtype),
             first);
      c.step_bytes =
          static_cast<size_t>(shape_elements(Shape(c.shape.begin() + 1, c.shape.end()))) *
          dtype_size(c.dtype);
    }
    columns.push_back(std::move(c));
  }
  return columns;
}

// Checks `e` against the first element; raises each padded column's longest row.
void check_element(const Example& e, const Example& first, std::vector<Column>& columns,
                   const std::string& stage) {
  if (e.is_batch()) fail(stage, "cannot pad a batch: put `unbatch` before it", e);
  for (Column& c : columns) {
    const Tensor* t = e.find(c.name);
    if (t == nullptr)
      fail(stage,
           "field '" + c.name + "' is in " + element_id(first) + " but missing in " + element_id(e),
           e);
    bool same = t->dtype() == c.dtype;
    if (c.pad == nullptr) {
      same = same && t->shape() == c.shape;
    } else {
      same = same && t->rank() == c.shape.size() &&
             std::equal(c.shape.begin() + 1, c.shape.end(), t->shape().begin() + 1);
    }
    if (!same)
      fail(stage,
           "field '" + c.name + "' has " + dtype_name(c.dtype) + " shape " +
               shape_to_string(c.shape) + " in " + element_id(first) + " but " +
               dtype_name(t->dtype()) + " shape " + shape_to_string(t->shape()) + " in " +
               element_id(e) +
               (c.pad ? "; only the first dimension may vary" : "; list it in `fields` to pad it"),
           e);
    if (c.pad == nullptr) continue;
    const int64_t len = t->shape()[0];
    if (c.pad->to == PadField::To::kFixed && len > c.pad->length && !c.pad->truncate)
      fail(stage,
           "field '" + c.name + "' of " + element_id(e) + " has length " + std::to_string(len) +
               ", more than the padded length " + std::to_string(c.pad->length) +
               " (set truncate to cut it)",
           e);
    c.longest = std::max(c.longest, len);
  }
  if (e.fields().size() != columns.size()) {
    for (const auto& field : e.fields()) {
      const std::string& name = field.first;
      if (std::none_of(columns.begin(), columns.end(),
                       [&](const Column& c) { return c.name == name; }))
        fail(stage,
             "field '" + name + "' is in " + element_id(e) + " but missing in " + element_id(first),
             e);
    }
  }
}

int64_t slot_length(const Column& c) {
  switch (c.pad->to) {
    case PadField::To::kFixed:
      return c.pad->length;
    case PadField::To::kMultiple:
      return (c.longest + c.pad->length - 1) / c.pad->length * c.pad->length;
    case PadField::To::kLongest:
      break;
  }
  return c.longest;
}

// The padded column of `elements`, and its lengths.
Tensor pad_column(const std::vector<Example>& elements, Column& c, std::vector<int32_t>& lengths,
                  int64_t& pads, int64_t& values) {
  const int64_t n = static_cast<int64_t>(elements.size());
  c.slot = slot_length(c);
  const size_t slot_bytes = static_cast<size_t>(c.slot) * c.step_bytes;
  const int64_t step_elements = static_cast<int64_t>(c.step_bytes / dtype_size(c.dtype));
  auto buffer = Buffer::allocate(slot_bytes * static_cast<size_t>(n));
  lengths.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& t = *elements[static_cast<size_t>(i)].find(c.name);
    const int64_t len = std::min(t.shape()[0], c.slot);
    std::byte* dst = buffer->mutable_data() + static_cast<size_t>(i) * slot_bytes;
    std::memcpy(dst, t.raw_data(), static_cast<size_t>(len) * c.step_bytes);
    fill_value(dst + static_cast<size_t>(len) * c.step_bytes, c.dtype, c.pad->value,
               (c.slot - len) * step_elements);
    lengths[static_cast<size_t>(i)] = static_cast<int32_t>(len);
    values += len * step_elements;
    pads += (c.slot - len) * step_elements;
  }
  Shape shape = c.shape;
  shape[0] = c.slot;
  shape.insert(shape.begin(), n);
  return Tensor(c.dtype, std::move(shape), std::move(buffer));
}

}  // namespace

Example pad_and_collate(const std::vector<Example>& elements, const PadOptions& o,
                        const std::string& stage, int64_t* pad_elements, int64_t* value_elements) {
  if (elements.empty()) throw_error(ErrorCode::kInternal, stage, "collate of no elements");
  const Example& first = elements.front();
  std::vector<PadField> defaults;
  std::vector<Column> columns = plan_columns(first, o, defaults, stage);
  for (const Example& e : elements) check_element(e, first, columns, stage);
  Example out;
  std::vector<RowMeta> rows;
  rows.reserve(elements.size());
  for (const Example& e : elements) rows.push_back(e.row(0));
  int64_t pads = 0, values = 0;
  std::vector<int32_t> lengths;
  for (Column& c : columns) {
    if (c.pad == nullptr) {
      BatchBuilder b(static_cast<int64_t>(elements.size()), stage);
      Example one;
      for (const Example& e : elements) {
        one.mutable_fields().assign(1, {c.name, *e.find(c.name)});
        b.add(one);
      }
      out.set(c.name, b.finish().get(c.name));
      continue;
    }
    out.set(c.name, pad_column(elements, c, lengths, pads, values));
    if (o.lengths) out.set(c.name + "_length", Tensor::from_vector(lengths));
  }
  out.set_rows(std::move(rows));
  if (pad_elements) *pad_elements += pads;
  if (value_elements) *value_elements += values;
  return out;
}

namespace {

class PaddedBatchIt : public Iterator {
 public:
  PaddedBatchIt(std::unique_ptr<Iterator> in, const PaddedBatchOptions* o)
      : in_(std::move(in)), o_(o) {}
  void save(StateWriter& w) override {
    w.begin("padded_batch");
    w.write_bool(done_);
    in_->save(w);
  }
  void restore(StateReader& r) override {
    r.expect("padded_batch");
    done_ = r.read_bool();
    in_->restore(r);
  }

 protected:
  std::optional<Example> next_impl() override {
    if (done_) return std::nullopt;
    elements_.clear();
    while (static_cast<int64_t>(elements_.size()) < o_->size) {
      auto e = in_->next();
      if (!e) {
        done_ = true;
        break;
      }
      elements_.push_back(std::move(*e));
    }
    const int64_t n = static_cast<int64_t>(elements_.size());
    if (n == 0 || (o_->drop_remainder && n < o_->size)) return std::nullopt;
    int64_t pads = 0, values = 0;
    Example out = pad_and_collate(elements_, o_->pad, label(), &pads, &values);
    elements_.clear();
    rows_.count(stats(), out);
    if (stats()) {
      stats()->counter("pad_elements") += pads;
      stats()->counter("value_elements") += values;
    }
    return out;
  }

 private:
  std::unique_ptr<Iterator> in_;
  const PaddedBatchOptions* o_;
  std::vector<Example> elements_;
  BatchRowStats rows_;
  bool done_ = false;
};

// The rows of one batch as elements.
struct NoOptions {};
class UnbatchIt : public Iterator {
 public:
  UnbatchIt(std::unique_ptr<Iterator> in, const NoOptions*) : in_(std::move(in)) {}
  void save(StateWriter& w) override {
    w.begin("unbatch");
    w.write_bool(batch_.has_value());
    if (batch_) w.write_example(*batch_);
    w.write_u64(row_);
    in_->save(w);
  }
  void restore(StateReader& r) override {
    r.expect("unbatch");
    batch_.reset();
    if (r.read_bool()) set_batch(r.read_example());
    row_ = r.read_u64();
    in_->restore(r);
  }

 protected:
  std::optional<Example> next_impl() override {
    while (!batch_ || row_ >= batch_->num_rows()) {
      auto b = in_->next();
      if (!b) {
        batch_.reset();
        return std::nullopt;
      }
      if (!b->is_batch())
        throw_error(ErrorCode::kInvalidArgument, label(),
                    "unbatch of an element that is not a batch", b->describe());
      set_batch(std::move(*b));
    }
    return row(row_++);
  }

 private:
  void set_batch(Example b);
  Example row(size_t i) const;

  std::unique_ptr<Iterator> in_;
  std::optional<Example> batch_;
  // Per field of the batch: the index of its length field, or -1.
  std::vector<int> length_of_;
  std::vector<bool> is_length_;
  size_t row_ = 0;
};

void UnbatchIt::set_batch(Example b) {
  const auto& fields = b.fields();
  length_of_.assign(fields.size(), -1);
  is_length_.assign(fields.size(), false);
  for (size_t i = 0; i < fields.size(); ++i) {
    const Tensor& t = fields[i].second;
    if (t.rank() < 1 || t.shape()[0] != static_cast<int64_t>(b.num_rows()))
      throw_error(ErrorCode::kInvalidArgument, label(),
                  "field '" + fields[i].first + "' has shape " + shape_to_string(t.shape()) +
                      ", not a leading dimension of " + std::to_string(b.num_rows()) + " rows",
                  b.describe());
    for (size_t j = 0; j < fields.size(); ++j) {
      const Tensor& l = fields[j].second;
      if (fields[j].first == fields[i].first + "_length" && t.rank() >= 2 && l.rank() == 1 &&
          l.dtype() == DType::kInt32) {
        length_of_[i] = static_cast<int>(j);
        is_length_[j] = true;
      }
    }
  }
  batch_ = std::move(b);
  row_ = 0;
}

Example UnbatchIt::row(size_t i) const {
  const RowMeta& meta = batch_->row(i);
  Example e(meta.id);
  e.set_echo(meta.echo);
  e.stamp_epoch(meta.epoch);
  const auto& fields = batch_->fields();
  for (size_t f = 0; f < fields.size(); ++f) {
    if (is_length_[f]) continue;
    const Tensor& t = fields[f].second;
    Shape shape(t.shape().begin() + 1, t.shape().end());
    const size_t row_bytes = t.nbytes() / batch_->num_rows();
    const std::byte* data = t.raw_data() + i * row_bytes;
    if (length_of_[f] >= 0) {
      const int32_t len = fields[static_cast<size_t>(length_of_[f])].second.data<int32_t>()[i];
      if (len < 0 || len > shape[0])
        throw_error(ErrorCode::kInvalidArgument, label(),
                    "row " + std::to_string(i) + " of field '" + fields[f].first + "' has length " +
                        std::to_string(len) + " in a slot of " + std::to_string(shape[0]),
                    batch_->describe());
      shape[0] = len;
    }
    if (t.buffer() == nullptr) {
      e.set(fields[f].first,
            Tensor::from_data(t.dtype(), shape, data,
                              static_cast<size_t>(shape_elements(shape)) * dtype_size(t.dtype())));
    } else {
      e.set(fields[f].first,
            Tensor(t.dtype(), std::move(shape), t.buffer(), t.offset() + i * row_bytes));
    }
  }
  return e;
}

}  // namespace

DatasetPtr make_padded_batch(DatasetPtr input, const PaddedBatchOptions& o) {
  if (o.size < 1)
    throw_error(ErrorCode::kInvalidArgument, "padded_batch",
                "size must be >= 1, got " + std::to_string(o.size));
  for (const PadField& p : o.pad.fields) {
    if (p.to != PadField::To::kLongest && p.length < 1)
      throw_error(ErrorCode::kInvalidArgument, "padded_batch",
                  "field '" + p.name + "': the padded length or multiple must be >= 1, got " +
                      std::to_string(p.length));
  }
  return std::make_shared<UnaryDataset<PaddedBatchOptions, PaddedBatchIt>>("padded_batch",
                                                                           std::move(input), o);
}

DatasetPtr make_unbatch(DatasetPtr input) {
  return std::make_shared<UnaryDataset<NoOptions, UnbatchIt>>("unbatch", std::move(input),
                                                              NoOptions{});
}

}  // namespace dataecho
