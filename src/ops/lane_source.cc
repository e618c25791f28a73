// LaneSource: a lane's pieces of a source for the lane and epoch of its context
// (include/dataecho/ops/elastic.h).
#include "dataecho/ops/elastic.h"

namespace dataecho {
namespace {

// Reads the record ranges `ranges` of `source` one after another.
class RangesIt : public Iterator {
 public:
  RangesIt(DatasetPtr source, std::vector<RecordRange> ranges, const IteratorContext& ctx)
      : source_(std::move(source)), ranges_(std::move(ranges)), ctx_(ctx) {}
  void save(StateWriter& w) override {
    w.begin("lane_source");
    w.write_u64(index_);
    w.write_bool(current_ != nullptr);
    if (current_) current_->save(w);
  }
  void restore(StateReader& r) override {
    r.expect("lane_source");
    uint64_t index = r.read_u64();
    bool open = r.read_bool();
    if (index > ranges_.size() || (open && index == ranges_.size()))
      throw_error(ErrorCode::kInvalidArgument, label(), "saved record range out of range",
                  "range " + std::to_string(index) + " of " + std::to_string(ranges_.size()));
    index_ = static_cast<size_t>(index);
    current_.reset();
    if (open) {
      current_ = source_->record_range(ranges_[index_])->make_iterator(ctx_);
      current_->restore(r);
    }
  }

 protected:
  std::optional<Example> next_impl() override {
    while (index_ < ranges_.size()) {
      if (!current_) current_ = source_->record_range(ranges_[index_])->make_iterator(ctx_);
      if (auto e = current_->next()) return e;
      current_.reset();
      ++index_;
    }
    return std::nullopt;
  }

 private:
  DatasetPtr source_;
  std::vector<RecordRange> ranges_;
  IteratorContext ctx_;
  size_t index_ = 0;
  std::unique_ptr<Iterator> current_;
};

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
    return std::make_unique<RangesIt>(source_, lane_ranges(label(), *plan_, ctx, slot_), ctx);
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
