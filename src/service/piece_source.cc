// The source of one lease of a piece (sharding "dynamic"): the piece's record ranges of
// the upstream's source, read in order from the lease's first record. The records before
// it are read and dropped here (a lease that restarts mid-piece re-reads at most that
// piece's records before it, never passing them on). Each element's id and record in the
// piece go to the tap, for the worker to number the elements the upstream makes of them.
#include "dataecho/core/error.h"
#include "dataecho/service/service.h"

namespace dataecho::service {
namespace {

class PieceIterator final : public Iterator {
 public:
  PieceIterator(std::shared_ptr<const Dataset> source, const std::vector<RecordRange>& ranges,
                int64_t from, std::shared_ptr<RecordTap> tap, const IteratorContext& ctx)
      : source_(std::move(source)), ranges_(ranges), tap_(std::move(tap)), ctx_(ctx) {
    // Whole ranges before `from` are not opened.
    while (range_ < ranges_.size() && from >= base_ + length(range_)) base_ += length(range_++);
    skip_ = from - base_;
  }

  void save(StateWriter&) override { refuse(); }
  void restore(StateReader&) override { refuse(); }

 protected:
  std::optional<Example> next_impl() override {
    while (range_ < ranges_.size()) {
      if (!it_) {
        it_ = source_->record_range(ranges_[range_])->make_iterator(ctx_);
        record_ = base_;
      }
      auto e = it_->next();
      if (!e) {
        base_ += length(range_++);
        it_.reset();
        continue;
      }
      const int64_t record = record_++;
      if (skip_ > 0) {
        --skip_;
        continue;
      }
      if (tap_) {
        std::lock_guard lock(tap_->mu);
        tap_->read.emplace_back(e->id(), record);
      }
      return e;
    }
    return std::nullopt;
  }

 private:
  int64_t length(size_t i) const { return ranges_[i].end - ranges_[i].begin; }
  [[noreturn]] void refuse() const {
    throw Error(ErrorCode::kInvalidArgument, label(),
                "a piece's source keeps no state: the service's consumer keeps the position");
  }

  std::shared_ptr<const Dataset> source_;
  const std::vector<RecordRange> ranges_;
  std::shared_ptr<RecordTap> tap_;
  const IteratorContext ctx_;
  size_t range_ = 0;
  int64_t base_ = 0;    // the piece's record where ranges_[range_] starts
  int64_t record_ = 0;  // the next element's record in the piece
  int64_t skip_ = 0;    // records of the current range still to drop
  std::unique_ptr<Iterator> it_;
};

class PieceSource final : public Dataset {
 public:
  PieceSource(std::shared_ptr<const Dataset> source, std::vector<RecordRange> ranges, int64_t from,
              std::shared_ptr<RecordTap> tap)
      : source_(std::move(source)), ranges_(std::move(ranges)), from_(from), tap_(std::move(tap)) {}
  std::string op_name() const override { return "piece"; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<PieceIterator>(source_, ranges_, from_, tap_, ctx);
  }

 private:
  std::shared_ptr<const Dataset> source_;
  const std::vector<RecordRange> ranges_;
  const int64_t from_;
  std::shared_ptr<RecordTap> tap_;
};

}  // namespace

DatasetPtr make_piece_source(std::shared_ptr<const Dataset> source, std::vector<RecordRange> ranges,
                             int64_t from, std::shared_ptr<RecordTap> records) {
  return std::make_shared<PieceSource>(std::move(source), std::move(ranges), from,
                                       std::move(records));
}

}  // namespace dataecho::service
