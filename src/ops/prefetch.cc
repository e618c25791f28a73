#include "dataecho/ops/prefetch.h"

#include <algorithm>
#include <vector>

#include "background_puller.h"
#include "dataecho/core/tuner.h"

namespace dataecho {
namespace {

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, PrefetchOptions o) : input_(std::move(input)), o_(o) {
    if (o_.autotune && !o_.follow) {
      o_.follow =
          std::make_shared<Knob>(Knob::Kind::kBuffer, "buffer", o_.buffer, 1,
                                 std::max(o_.buffer, o_.max_buffer), [](int64_t b) { return b; });
    }
  }
  std::string op_name() const override { return "prefetch"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    if (o_.autotune && ctx.tuner) ctx.tuner->add(o_.follow, node_stats());
    const int64_t buffer = o_.follow ? o_.follow->value() : o_.buffer;
    auto it = std::make_unique<It>(input_, ctx, static_cast<size_t>(buffer), node_stats(), label());
    if (o_.follow) it->follow(*o_.follow);
    return it;
  }

 private:
  // A BackgroundPuller of `buffer` elements: the consumer is woken once half of it is
  // ready, so that it takes several elements per wake-up, and the worker once it is down
  // to half, so that it refills several per wake-up. The worker queues a cheap input's
  // elements up to kPullBatch per lock.
  class It : public Iterator {
   public:
    It(const DatasetPtr& input, const IteratorContext& ctx, size_t cap,
       std::shared_ptr<NodeStats> stats, const std::string& label)
        : puller_(input, ctx,
                  {.capacity = cap,
                   .wake_consumer = std::max<size_t>(1, cap / 2),
                   .wake_worker = cap / 2,
                   .pull_batch = kPullBatch,
                   .label = label,
                   .stats = std::move(stats)}) {}
    ~It() override { handle_.reset(); }  // before the puller: no resize() from here on
    // The tuner's changes, on its thread.
    void follow(Knob& knob) {
      handle_ = knob.listen([this](int64_t b) {
        const auto cap = static_cast<size_t>(b);
        puller_.resize(cap, std::max<size_t>(1, cap / 2), cap / 2);
      });
      const auto cap = static_cast<size_t>(knob.value());  // a change before listen()
      puller_.resize(cap, std::max<size_t>(1, cap / 2), cap / 2);
    }

    void save(StateWriter& w) override {
      puller_.save(w, [&](const std::vector<Example>& queue, bool input_done, bool failed) {
        w.begin("prefetch");
        w.write_bool(input_done);
        w.write_bool(failed);
        if (failed)
          throw_error(ErrorCode::kInvalidArgument, label(),
                      "cannot save a pipeline that has failed");
        w.write_u64(queue.size());
        for (const auto& e : queue) w.write_example(e);
      });
    }
    void restore(StateReader& r) override {
      puller_.restore(r, [&](std::vector<Example>& queue, bool& input_done) {
        r.expect("prefetch");
        input_done = r.read_bool();
        r.read_bool();
        const uint64_t n = r.read_u64();
        for (uint64_t i = 0; i < n; ++i) queue.push_back(r.read_example());
      });
    }

   protected:
    std::optional<Example> next_impl() override {
      std::optional<Example> e;
      puller_.take(e, /*wait=*/true);
      return e;
    }

   private:
    static constexpr size_t kPullBatch = 64;
    BackgroundPuller puller_;
    Knob::Handle handle_;
  };

  DatasetPtr input_;
  PrefetchOptions o_;
};

}  // namespace

DatasetPtr make_prefetch(DatasetPtr input, const PrefetchOptions& o) {
  if (o.buffer < 1)
    throw_error(ErrorCode::kInvalidArgument, "prefetch",
                "buffer must be >= 1, got " + std::to_string(o.buffer));
  return std::make_shared<PrefetchDataset>(std::move(input), o);
}

}  // namespace dataecho
