// UnaryDataset: a node with one input and immutable options, whose iterator is
// `It(std::unique_ptr<Iterator> input, const Options* options)` (the options live as
// long as the dataset, which every iterator keeps alive). Internal to the ops layer.
#pragma once

#include <memory>
#include <string>

#include "dataecho/core/dataset.h"

namespace dataecho {

template <class Options, class It>
class UnaryDataset : public Dataset {
 public:
  UnaryDataset(std::string op, DatasetPtr input, Options options)
      : op_(std::move(op)), input_(std::move(input)), o_(std::move(options)) {}
  std::string op_name() const override { return op_; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_->make_iterator(ctx), &o_);
  }

 private:
  std::string op_;
  DatasetPtr input_;
  Options o_;
};

}  // namespace dataecho
