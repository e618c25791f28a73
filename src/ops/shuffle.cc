#include "dataecho/ops/shuffle.h"

#include "dataecho/core/rng.h"

namespace dataecho {
namespace {

class ShuffleDataset : public Dataset {
 public:
  ShuffleDataset(DatasetPtr input, ShuffleOptions o) : input_(std::move(input)), o_(o) {}
  std::string op_name() const override { return "shuffle"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    uint64_t seed =
        o_.reshuffle_each_iteration ? mix_seed(o_.seed, static_cast<uint64_t>(ctx.epoch)) : o_.seed;
    return std::make_unique<It>(input_->make_iterator(ctx), o_.buffer, lane_seed(seed, ctx.lane));
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> in, int64_t cap, uint64_t seed)
        : in_(std::move(in)), cap_(static_cast<size_t>(cap)), rng_(seed) {}
    void save(StateWriter& w) override {
      w.begin("shuffle");
      w.write_rng(rng_);
      w.write_bool(input_done_);
      w.write_u64(buf_.size());
      for (const auto& e : buf_) w.write_example(e);
      in_->save(w);
    }
    void restore(StateReader& r) override {
      r.expect("shuffle");
      r.read_rng(rng_);
      input_done_ = r.read_bool();
      uint64_t n = r.read_u64();
      if (n > cap_)
        throw_error(ErrorCode::kInvalidArgument, label(),
                    "saved buffer larger than the buffer size");
      buf_.clear();
      for (uint64_t i = 0; i < n; ++i) buf_.push_back(r.read_example());
      in_->restore(r);
    }

   protected:
    std::optional<Example> next_impl() override {
      while (!input_done_ && buf_.size() < cap_) {
        auto e = in_->next();
        if (!e) {
          input_done_ = true;
          break;
        }
        e->compact();
        buf_.push_back(std::move(*e));
      }
      if (buf_.empty()) return std::nullopt;
      size_t i = static_cast<size_t>(rng_.uniform(buf_.size()));
      Example out = std::move(buf_[i]);
      if (!input_done_) {
        if (auto e = in_->next()) {
          e->compact();
          buf_[i] = std::move(*e);
          return out;
        }
        input_done_ = true;
      }
      if (i + 1 != buf_.size()) buf_[i] = std::move(buf_.back());
      buf_.pop_back();
      return out;
    }

   private:
    std::unique_ptr<Iterator> in_;
    size_t cap_;
    Rng rng_;
    bool input_done_ = false;
    std::vector<Example> buf_;
  };

  DatasetPtr input_;
  ShuffleOptions o_;
};

}  // namespace

DatasetPtr make_shuffle(DatasetPtr input, const ShuffleOptions& o) {
  if (o.buffer < 1)
    throw_error(ErrorCode::kInvalidArgument, "shuffle",
                "buffer must be >= 1, got " + std::to_string(o.buffer));
  return std::make_shared<ShuffleDataset>(std::move(input), o);
}

}  // namespace dataecho
