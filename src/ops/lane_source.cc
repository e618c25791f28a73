// LaneSource: a lane's pieces of a source for the lane and epoch of its context
// (include/dataecho/ops/elastic.h).
#include "dataecho/ops/elastic.h"

#include "sequence_iterator.h"

namespace dataecho {
namespace {

// The lane's pieces for the context's lane and epoch: slot `slot` of them, or all of them
// in order (slot -1), as the record ranges to read.
std::vector<RecordRange> lane_ranges(const std::string& label, const ElasticPlan& plan,
                                     const IteratorContext& ctx, int64_t slot) {
  if (ctx.lane < 0 || ctx.lane >= plan.lanes())
    throw_error(ErrorCode::kInvalidArgument, label,
                "a lane source reads the lane its iterator is made for (0 to " +
                    std::to_string(plan.lanes() - 1) + "), and this one is made for lane " +
                    std::to_string(ctx.lane));
  std::vector<int64_t> pieces = plan.lane_pieces(ctx.lane, ctx.epoch);
  if (slot >= 0) pieces = {pieces[static_cast<size_t>(slot)]};
  std::vector<RecordRange> ranges;
  for (int64_t p : pieces) {
    const Piece& piece = plan.pieces()[static_cast<size_t>(p)];
    ranges.insert(ranges.end(), piece.begin(), piece.end());
  }
  return ranges;
}

// Slot `slot` of a lane: its slot-th piece of the epoch (or the whole lane for slot -1).
class LaneDataset : public Dataset {
 public:
  LaneDataset(DatasetPtr source, std::shared_ptr<const ElasticPlan> plan, int64_t slot)
      : source_(std::move(source)), plan_(std::move(plan)), slot_(slot) {
    if (slot_ < 0) {
      for (int64_t j = 0; j < plan_->pieces_per_lane(); ++j)
        slots_.push_back(std::make_shared<LaneDataset>(source_, plan_, j));
    }
  }
  std::string op_name() const override { return "lane_source"; }
  std::vector<DatasetPtr> shards() const override {
    return std::vector<DatasetPtr>(slots_.begin(), slots_.end());
  }
  bool counts_elements() const override { return false; }  // the source counts them
  void attach(std::string label, std::shared_ptr<NodeStats> stats) override {
    for (auto& s : slots_) s->attach(label, stats);
    Dataset::attach(std::move(label), std::move(stats));
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    // The record ranges of the lane's pieces, one after another.
    auto ranges =
        std::make_shared<const std::vector<RecordRange>>(lane_ranges(label(), *plan_, ctx, slot_));
    return std::make_unique<SequenceIt>(
        "lane_source", "record range", ranges->size(),
        [source = source_, ranges](size_t i) { return source->record_range((*ranges)[i]); }, ctx);
  }

 private:
  DatasetPtr source_;
  std::shared_ptr<const ElasticPlan> plan_;
  int64_t slot_;
  std::vector<std::shared_ptr<LaneDataset>> slots_;
};

}  // namespace

DatasetPtr make_lane_source(DatasetPtr source, std::shared_ptr<const ElasticPlan> plan) {
  if (!source || !plan)
    throw_error(ErrorCode::kInvalidArgument, "lane_source", "needs a source and a plan");
  return std::make_shared<LaneDataset>(std::move(source), std::move(plan), -1);
}

}  // namespace dataecho
