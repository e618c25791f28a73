// A source that counts how many elements its iterators have produced, so that tests
// can check how far ahead of the consumer a buffering operator has read.
#pragma once

#include <atomic>
#include <memory>

#include "dataecho/core/dataset.h"

namespace dataecho::testing {

class CountingSource : public Dataset {
 public:
  explicit CountingSource(int64_t count) : count_(count) {}
  std::string op_name() const override { return "counting"; }
  int64_t pulled() const { return pulled_->load(); }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext&) const override {
    return std::make_unique<It>(count_, pulled_);
  }

 private:
  class It : public Iterator {
   public:
    It(int64_t count, std::shared_ptr<std::atomic<int64_t>> pulled)
        : count_(count), pulled_(std::move(pulled)) {}
    void save(StateWriter& w) override { w.write_i64(pos_); }
    void restore(StateReader& r) override { pos_ = r.read_i64(); }

   protected:
    std::optional<Example> next_impl() override {
      if (pos_ >= count_) return std::nullopt;
      Example e(pos_);
      e.set("value", Tensor::scalar<int64_t>(pos_));
      ++pos_;
      ++*pulled_;
      return e;
    }

   private:
    int64_t count_, pos_ = 0;
    std::shared_ptr<std::atomic<int64_t>> pulled_;
  };

  int64_t count_;
  std::shared_ptr<std::atomic<int64_t>> pulled_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace dataecho::testing
