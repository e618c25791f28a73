#include "dataecho/ops/sample.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dataecho/core/rng.h"

namespace dataecho {
namespace {

class SampleDataset : public Dataset {
 public:
  SampleDataset(std::vector<DatasetPtr> inputs, SampleOptions o)
      : inputs_(std::move(inputs)), o_(std::move(o)) {}
  std::string op_name() const override { return "sample"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(this, ctx);
  }

 private:
  class It : public Iterator {
   public:
    It(const SampleDataset* ds, const IteratorContext& ctx)
        : ds_(ds), ctx_(ctx), rng_(ds->o_.seed), in_(ds->inputs_.size()) {}

    void save(StateWriter& w) override {
      w.begin("sample");
      w.write_rng(rng_);
      w.write_bool(finished_);
      for (auto& in : in_) {
        w.write_bool(in.done);
        w.write_i64(in.epoch);
        w.write_bool(in.it != nullptr);
        if (in.it) in.it->save(w);
      }
    }
    void restore(StateReader& r) override {
      r.expect("sample");
      r.read_rng(rng_);
      finished_ = r.read_bool();
      for (size_t i = 0; i < in_.size(); ++i) {
        Input& in = in_[i];
        in.done = r.read_bool();
        in.epoch = r.read_i64();
        in.it.reset();
        if (r.read_bool()) {
          open(i);
          in.it->restore(r);
        }
      }
    }

   protected:
    std::optional<Example> next_impl() override {
      while (!finished_) {
        const size_t i = draw();
        if (i == in_.size()) break;
        Input& in = in_[i];
        if (!in.it) open(i);
        if (auto e = in.it->next()) return counted(i, std::move(*e));
        in.it.reset();
        if (ds_->o_.stop == SampleOptions::Stop::kFirst) break;
        if (ds_->o_.stop == SampleOptions::Stop::kAll) {
          in.done = true;
          continue;
        }
        ++in.epoch;  // kNever: the input's next epoch
        open(i);
        if (auto e = in.it->next()) return counted(i, std::move(*e));
        throw_error(ErrorCode::kInvalidArgument, label(),
                    "input " + std::to_string(i) +
                        " is empty: with \"stop\": \"never\" it would "
                        "be restarted forever");
      }
      finished_ = true;
      return std::nullopt;
    }

   private:
    struct Input {
      std::unique_ptr<Iterator> it;
      bool done = false;
      int64_t epoch = 0;
      std::atomic<int64_t>* counter = nullptr;
      bool checked = false;  // its first element's fields were compared
    };

    // The input to read next, by weight among those not done; in_.size() when none is left.
    size_t draw() {
      const auto& w = ds_->o_.weights;
      double total = 0;
      for (size_t i = 0; i < in_.size(); ++i) total += in_[i].done ? 0 : w[i];
      if (total <= 0) return in_.size();
      double u = rng_.uniform01() * total;
      size_t last = in_.size();
      for (size_t i = 0; i < in_.size(); ++i) {
        if (in_[i].done || w[i] <= 0) continue;
        last = i;
        if (u < w[i]) return i;
        u -= w[i];
      }
      return last;  // rounding at the top end
    }
    void open(size_t i) {
      IteratorContext c = ctx_;
      c.epoch = ctx_.epoch + in_[i].epoch;
      in_[i].it = ds_->inputs_[i]->make_iterator(c);
    }
    Example counted(size_t i, Example e) {
      if (stats()) {
        if (!in_[i].counter) in_[i].counter = &stats()->counter("from_input_" + std::to_string(i));
        *in_[i].counter += 1;
      }
      if (!in_[i].checked) check_fields(i, e);
      if (!ds_->o_.input_field.empty())
        e.set(ds_->o_.input_field, Tensor::scalar<int64_t>(static_cast<int64_t>(i)));
      return e;
    }

    // The inputs must give the same fields, or what follows (a batch) would fail on a
    // mix it cannot name: the first element of each input is compared with the first
    // one's, and fields that differ other than by extra fields of one of them (a list's
    // further columns) are an error naming both inputs.
    void check_fields(size_t i, const Example& e) {
      in_[i].checked = true;
      std::vector<std::string> names;
      for (const auto& f : e.fields()) names.push_back(f.first);
      std::sort(names.begin(), names.end());
      if (first_input_ == SIZE_MAX) {
        first_input_ = i;
        first_fields_ = names;
        return;
      }
      if (std::includes(names.begin(), names.end(), first_fields_.begin(), first_fields_.end()) ||
          std::includes(first_fields_.begin(), first_fields_.end(), names.begin(), names.end()))
        return;
      auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
        return s;
      };
      throw_error(ErrorCode::kNotFound, label(),
                  "input " + std::to_string(i) + " gives fields (" + list(names) + ") but input " +
                      std::to_string(first_input_) + " gives (" + list(first_fields_) +
                      "): the inputs of a sample must give the same fields (name them alike: a "
                      "tfrecord source's \"features\", a tar source's \"fields\", a map)",
                  e.describe());
    }

    const SampleDataset* ds_;
    IteratorContext ctx_;
    Rng rng_;
    std::vector<Input> in_;
    bool finished_ = false;
    size_t first_input_ = SIZE_MAX;          // the input whose fields the others must give
    std::vector<std::string> first_fields_;  // sorted
  };

  std::vector<DatasetPtr> inputs_;
  SampleOptions o_;
};

}  // namespace

DatasetPtr make_sample(std::vector<DatasetPtr> inputs, SampleOptions o) {
  if (inputs.empty()) throw_error(ErrorCode::kInvalidArgument, "sample", "no inputs given");
  if (o.weights.empty()) o.weights.assign(inputs.size(), 1.0);
  if (o.weights.size() != inputs.size())
    throw_error(ErrorCode::kInvalidArgument, "sample",
                std::to_string(o.weights.size()) + " weights for " + std::to_string(inputs.size()) +
                    " inputs");
  double total = 0;
  for (double w : o.weights) {
    if (!(w >= 0) || w > 1e300)
      throw_error(ErrorCode::kInvalidArgument, "sample",
                  "a weight must be a finite number >= 0, got " + std::to_string(w));
    total += w;
  }
  if (total <= 0) throw_error(ErrorCode::kInvalidArgument, "sample", "every weight is 0");
  return std::make_shared<SampleDataset>(std::move(inputs), std::move(o));
}

}  // namespace dataecho
