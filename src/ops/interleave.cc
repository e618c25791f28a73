#include "dataecho/ops/interleave.h"

#include "dataecho/core/tuner.h"
#include "dataecho/ops/prefetch.h"

namespace dataecho {
namespace {

class InterleaveDataset : public Dataset {
 public:
  InterleaveDataset(DatasetPtr input, InterleaveOptions o) : input_(std::move(input)), o_(o) {
    if (o_.autotune) {
      const int64_t cycle = o_.cycle;
      knob_ = std::make_shared<Knob>(Knob::Kind::kBuffer, "buffer_per_shard", o_.buffer_per_shard,
                                     1, 1024, [cycle](int64_t b) { return cycle * b; });
    }
    for (const auto& s : input_->shards()) {
      // Parallel fetch: each shard behind its own prefetch thread.
      PrefetchOptions po;
      po.buffer = o_.buffer_per_shard;
      po.follow = knob_;
      shards_.push_back(parallel() ? make_prefetch(s, po) : s);
    }
  }
  std::string op_name() const override { return "interleave"; }
  bool owns_threads() const override { return parallel(); }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    if (knob_ && ctx.tuner) ctx.tuner->add(knob_, node_stats());
    return std::make_unique<It>(this, ctx);
  }

 private:
  bool parallel() const { return o_.autotune || o_.parallelism < 0 || o_.parallelism > 1; }

  class It : public Iterator {
   public:
    It(const InterleaveDataset* ds, const IteratorContext& ctx)
        : ds_(ds), ctx_(ctx), slots_(static_cast<size_t>(ds->o_.cycle)) {}

    void save(StateWriter& w) override {
      w.begin("interleave");
      w.write_i64(next_shard_);
      w.write_u64(pos_);
      for (auto& s : slots_) {
        w.write_i64(s.shard);
        if (s.it) s.it->save(w);
      }
    }
    void restore(StateReader& r) override {
      r.expect("interleave");
      next_shard_ = r.read_i64();
      pos_ = r.read_u64();
      if (pos_ >= slots_.size() || next_shard_ > static_cast<int64_t>(ds_->shards_.size())) {
        throw_error(ErrorCode::kInvalidArgument, label(),
                    "saved state does not fit this interleave");
      }
      for (auto& s : slots_) {
        s = Slot{};
        int64_t shard = r.read_i64();
        if (shard >= 0) {
          if (shard >= static_cast<int64_t>(ds_->shards_.size()))
            throw_error(ErrorCode::kInvalidArgument, label(), "saved shard index out of range");
          open(s, shard);
          s.it->restore(r);
        }
      }
    }

   protected:
    std::optional<Example> next_impl() override {
      const int64_t n = static_cast<int64_t>(ds_->shards_.size());
      // Open every free slot first, so that all shards' fetch threads start together.
      for (auto& s : slots_) {
        if (!s.it && next_shard_ < n) open(s, next_shard_++);
      }
      size_t empty_seen = 0;
      while (empty_seen < slots_.size()) {
        Slot& s = slots_[pos_];
        if (!s.it) {
          if (next_shard_ < n) {
            open(s, next_shard_++);
          } else {
            ++empty_seen;
            pos_ = (pos_ + 1) % slots_.size();
            continue;
          }
        }
        if (auto e = s.it->next()) {
          pos_ = (pos_ + 1) % slots_.size();
          return e;
        }
        s = Slot{};  // this shard is done; its slot takes the next shard
      }
      return std::nullopt;
    }

   private:
    struct Slot {
      int64_t shard = -1;
      std::unique_ptr<Iterator> it;
    };
    void open(Slot& s, int64_t shard) {
      s.shard = shard;
      s.it = ds_->shards_[static_cast<size_t>(shard)]->make_iterator(ctx_);
    }

    const InterleaveDataset* ds_;
    IteratorContext ctx_;
    std::vector<Slot> slots_;
    int64_t next_shard_ = 0;
    size_t pos_ = 0;
  };

  DatasetPtr input_;
  InterleaveOptions o_;
  std::shared_ptr<Knob> knob_;  // autotuned buffer_per_shard, followed by the shards' readers
  std::vector<DatasetPtr> shards_;
};

}  // namespace

DatasetPtr make_interleave(DatasetPtr input, const InterleaveOptions& o) {
  if (o.cycle < 1)
    throw_error(ErrorCode::kInvalidArgument, "interleave",
                "cycle must be >= 1, got " + std::to_string(o.cycle));
  if (o.buffer_per_shard < 1)
    throw_error(ErrorCode::kInvalidArgument, "interleave",
                "buffer_per_shard must be >= 1, got " + std::to_string(o.buffer_per_shard));
  if (input->shards().empty()) {
    throw_error(ErrorCode::kInvalidArgument, "interleave",
                "its input has no shards: put interleave right after a source over several files "
                "(or a range with \"shards\")");
  }
  return std::make_shared<InterleaveDataset>(std::move(input), o);
}

}  // namespace dataecho
