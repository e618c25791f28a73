#include "dataecho/ops/prefetch.h"

#include <algorithm>
#include <deque>

#include "background_puller.h"

namespace dataecho {
namespace {

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, PrefetchOptions o) : input_(std::move(input)), o_(o) {}
  std::string op_name() const override { return "prefetch"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(input_, ctx, static_cast<size_t>(o_.buffer), node_stats(), label());
  }

 private:
  // A BackgroundPuller of `buffer` elements: the consumer is woken once half of it is
  // ready, so that it takes several elements per wake-up, and the worker once it is down
  // to half, so that it refills several per wake-up.
  class It : public Iterator {
   public:
    It(const DatasetPtr& input, const IteratorContext& ctx, size_t cap,
       std::shared_ptr<NodeStats> stats, const std::string& label)
        : puller_(input, ctx,
                  {.capacity = cap,
                   .wake_consumer = std::max<size_t>(1, cap / 2),
                   .wake_worker = cap / 2,
                   .label = label,
                   .stats = std::move(stats)}) {}

    void save(StateWriter& w) override {
      puller_.save(w, [&](const std::deque<Example>& queue, bool input_done, bool failed) {
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
      puller_.restore(r, [&](std::deque<Example>& queue, bool& input_done) {
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
    BackgroundPuller puller_;
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
