// SequenceIt: reads parts one after another, each made only when it is reached, and saves
// its place (the part's index and, when one is open, the part's own state). The
// concatenation of datasets and an elastic lane's record ranges are both this.
// Thread-safety: an iterator, for one thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "dataecho/core/dataset.h"
#include "dataecho/core/error.h"

namespace dataecho {

class SequenceIt : public Iterator {
 public:
  // `count` parts; part(i) makes the i-th dataset; `tag` names the saved state and
  // `part_name` a part in the error a bad state gets ("shard index", "record range").
  SequenceIt(std::string tag, std::string part_name, size_t count,
             std::function<DatasetPtr(size_t)> part, const IteratorContext& ctx)
      : tag_(std::move(tag)),
        part_name_(std::move(part_name)),
        count_(count),
        part_(std::move(part)),
        ctx_(ctx) {}
  void save(StateWriter& w) override {
    w.begin(tag_);
    w.write_u64(index_);
    w.write_bool(current_ != nullptr);
    if (current_) current_->save(w);
  }
  void restore(StateReader& r) override {
    r.expect(tag_);
    const uint64_t index = r.read_u64();
    const bool open = r.read_bool();
    if (index > count_ || (open && index == count_))
      throw_error(ErrorCode::kInvalidArgument, label(), "saved " + part_name_ + " out of range",
                  std::to_string(index) + " of " + std::to_string(count_));
    index_ = static_cast<size_t>(index);
    current_.reset();
    if (open) {
      current_ = part_(index_)->make_iterator(ctx_);
      current_->restore(r);
    }
  }

 protected:
  std::optional<Example> next_impl() override {
    while (index_ < count_) {
      if (!current_) current_ = part_(index_)->make_iterator(ctx_);
      if (auto e = current_->next()) return e;
      current_.reset();
      ++index_;
    }
    return std::nullopt;
  }

 private:
  std::string tag_, part_name_;
  size_t count_;
  std::function<DatasetPtr(size_t)> part_;
  IteratorContext ctx_;
  size_t index_ = 0;
  std::unique_ptr<Iterator> current_;
};

}  // namespace dataecho
