// The elastic merge: rank r's batches of the global order over the lanes it owns
// (include/dataecho/ops/elastic.h). One BackgroundPuller per owned lane reads the lane's
// stages ahead; the merge takes, for step s, positions [sG, (s + 1)G) that are r mod N,
// in increasing order (position i is the next element of lane i mod K), collates them
// through the batch builder, and hands out floor(e) or ceil(e) copies of the batch
// (batch echo). With `prefetch`, a collator thread does the taking and collating ahead.
// save() puts the rows of batches collated but not returned back at the front of their
// lanes' queues (elastic_state.h's row views: no copy, no re-read).
// Map-and-batch fusion across lanes (place_rows): where a lane ends in a map that keeps
// order, each lane's map computes its output into the row of the batch its position
// falls in (LanePlacer), and collation finds it there instead of copying it.
// A consumer of W (DataLoader workers) is the merge of consumer r + N w of N W. After a
// restore, each lane drops its `skip` elements, then its next one goes to its first
// position in the restored step, wherever the lane stood (a worker's snapshot).
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "background_puller.h"
#include "batch_builder.h"
#include "dataecho/core/rng.h"
#include "elastic_state.h"
#include "map_and_batch.h"
#include "worker_pause.h"

namespace dataecho {
namespace {

namespace es = elastic_state;

// Where a lane's map places its outputs: lane l's element j is global position
// i = jK + l, in step i div G at row (i - first) / N, first being the step's first
// position of the rank. The lane's numbering starts at `base` (its elements before the
// map's output 0: a restore's queue); steps before `floor` (collated already, or every
// step during a restore) are not placed. A forecast only: a row that collation puts
// elsewhere (a hole where a lane ends early moves the rows after it) is copied
// (RowPlacer's rows_may_move). The batches of the steps the lanes' maps run ahead to
// hold about the rows those maps hold ahead anyway: L lanes ahead by q elements fill
// q K / G steps of G / N rows, q L rows.
class LanePlacer : public RowPlacer {
 public:
  struct Geometry {
    int64_t lanes, global_batch, world_size, rank;
  };
  LanePlacer(std::shared_ptr<RowPlacer> batches, Geometry g, int64_t lane,
             const std::atomic<int64_t>* floor)
      : RowPlacer(1), batches_(std::move(batches)), g_(g), lane_(lane), floor_(floor) {}
  bool slot_for(int64_t k, OutputSlot* slot) override {
    const int64_t j = base_.load(std::memory_order_acquire) + k;  // skipped ones: < 0
    if (k < 0 || j < 0) return false;
    const int64_t i = j * g_.lanes + lane_;
    const int64_t step = i / g_.global_batch;
    if (step < floor_->load(std::memory_order_acquire)) return false;
    const int64_t begin = step * g_.global_batch;
    const int64_t first =
        begin + ((g_.rank - begin % g_.world_size) % g_.world_size + g_.world_size) % g_.world_size;
    return batches_->slot_at(step, (i - first) / g_.world_size, slot);
  }
  void reset() override {}  // the merge sets the base and the batches after a restore
  void set_base(int64_t base) { base_.store(base, std::memory_order_release); }

 private:
  const std::shared_ptr<RowPlacer> batches_;
  const Geometry g_;
  const int64_t lane_;
  const std::atomic<int64_t>* const floor_;
  std::atomic<int64_t> base_{0};
};

// The floor that stops every placement (during a restore).
constexpr int64_t kNoPlacing = std::numeric_limits<int64_t>::max() / 4;

// A collated batch of one step, with the owned lane (its index among the rank's lanes)
// of each row, in row order.
struct Collated {
  int64_t step = 0;
  Example batch;
  std::vector<size_t> lanes;
  std::vector<int64_t> emitted;  // lane_counts: each owned lane's rows so far, this included
};

class ElasticBatchIt : public Iterator {
 public:
  ElasticBatchIt(const DatasetPtr& lane, std::shared_ptr<const ElasticPlan> plan,
                 ElasticBatchOptions o, const IteratorContext& ctx, std::string label,
                 std::shared_ptr<NodeStats> stats);
  ~ElasticBatchIt() override {
    token_->cancel();
    stop_collator();
  }

  void save(StateWriter& w) override;
  void restore(StateReader& r) override;

 protected:
  std::optional<Example> next_impl() override;

 private:
  void place_rows(const DatasetPtr& lane);
  std::optional<Example> take(size_t lane);
  std::optional<Example> take_one(size_t lane);
  std::optional<Collated> collate(int64_t step);
  std::optional<Collated> next_collated();
  void run_collator();
  void stop_collator();
  int64_t copies_of(int64_t step) const;
  std::string save_lane(size_t lane, const std::vector<Example>& ledger, nlohmann::json& entry);
  void restore_lane(size_t lane, const std::string& blob, const nlohmann::json& entry,
                    int64_t step);
  nlohmann::json header() const;
  std::string who() const;

  const ElasticBatchOptions given_;  // as the spec gives them (the state's header)
  const ElasticBatchOptions o_;      // as the merge reads: es::consumer_view(given_)
  const std::shared_ptr<const ElasticPlan> plan_;
  const std::string label_;
  const std::shared_ptr<NodeStats> stats_;
  const int64_t epoch_;
  std::vector<int64_t> lanes_;                // the owned lanes, in increasing order
  std::shared_ptr<CancellationToken> token_;  // cancelled with the pipeline's, or on destruction
  CancellationToken::Registration registration_;
  std::vector<std::unique_ptr<BackgroundPuller>> pullers_;
  // Per owned lane: elements taken from its puller and given back unused (a short step
  // under drop_remainder), whether its puller has ended, and elements taken from it.
  std::vector<std::deque<Example>> front_;
  std::vector<char> ended_;
  std::vector<int64_t> taken_;
  // Per owned lane: elements to drop before the next is taken (a restore's skip), and
  // (lane_counts) rows of it collated since the start or the restore.
  std::vector<int64_t> skip_;
  std::vector<int64_t> emitted_;
  // The consumer's side: the step and batch copy it returns next, the batch whose copies
  // it is returning.
  int64_t step_ = 0;
  int64_t copy_ = 0;
  int64_t copies_ = 1;
  std::optional<Collated> held_;
  int64_t returned_ = 0;
  BatchRowStats rows_;
  std::atomic<int64_t>* collated_ = nullptr;
  std::atomic<int64_t>* placed_rows_ = nullptr;
  // Fusion across lanes: the rank's batches (numbered by step) and each lane's placer;
  // floor_ is the step being collated (kNoPlacing during a restore).
  std::shared_ptr<RowPlacer> batches_;
  std::vector<std::shared_ptr<LanePlacer>> placers_;
  std::atomic<int64_t> floor_{0};
  // The collator's side (under mu_): batches collated ahead, the next step to collate.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Collated> queue_;
  int64_t collate_step_ = 0;
  bool finished_ = false;  // no more batches: the last step was short or empty
  std::exception_ptr error_;
  bool paused_ = false;
  bool busy_ = false;
  bool stop_ = false;
  std::thread collator_;
};

ElasticBatchIt::ElasticBatchIt(const DatasetPtr& lane, std::shared_ptr<const ElasticPlan> plan,
                               ElasticBatchOptions o, const IteratorContext& ctx, std::string label,
                               std::shared_ptr<NodeStats> stats)
    : given_(o),
      o_(es::consumer_view(o)),
      plan_(std::move(plan)),
      label_(std::move(label)),
      stats_(std::move(stats)),
      epoch_(ctx.epoch),
      lanes_(
          elastic_lanes_of(plan_->lanes(), o.world_size, o.rank, o.consumers_per_rank, o.consumer)),
      token_(CancellationToken::make()) {
  registration_ = ctx.cancel->on_cancel([t = token_] { t->cancel(); });
  const int64_t k = plan_->lanes();
  const size_t queue = static_cast<size_t>(
      o_.lane_queue > 0 ? o_.lane_queue : std::max<int64_t>(2, (o_.global_batch + k - 1) / k));
  for (int64_t l : lanes_) {
    IteratorContext lane_ctx = ctx;
    lane_ctx.cancel = token_;
    lane_ctx.lane = l;
    pullers_.push_back(std::make_unique<BackgroundPuller>(
        lane, lane_ctx,
        BackgroundPuller::Options{.capacity = queue,
                                  .wake_consumer = std::max<size_t>(1, queue / 2),
                                  .wake_worker = queue / 2,
                                  .label = label_ + " lane " + std::to_string(l),
                                  .stats = nullptr}));
  }
  front_.resize(lanes_.size());
  ended_.assign(lanes_.size(), 0);
  taken_.assign(lanes_.size(), 0);
  skip_.assign(lanes_.size(), 0);
  emitted_.assign(lanes_.size(), 0);
  if (stats_) collated_ = &stats_->counter("collated");
  if (o_.place_rows) place_rows(lane);
}

// Hands each lane's map a LanePlacer, where the lane's last stage is a map that keeps
// order (as fuse_map_and_batch requires of a batch's input).
void ElasticBatchIt::place_rows(const DatasetPtr& lane) {
  const auto* map = dynamic_cast<const RowPlacingDataset*>(lane.get());
  if (map == nullptr || !map->keeps_order()) return;
  const int64_t k = plan_->lanes(), g = o_.global_batch, n = o_.world_size;
  const LanePlacer::Geometry geometry{k, g, n, o_.rank};
  batches_ = std::make_shared<RowPlacer>((g + n - 1) / n, /*rows_may_move=*/true);
  for (size_t i = 0; i < lanes_.size(); ++i) {
    auto* placing = dynamic_cast<RowPlacingIterator*>(&pullers_[i]->input());
    if (placing == nullptr) {
      batches_.reset();
      placers_.clear();
      return;
    }
    placers_.push_back(std::make_shared<LanePlacer>(batches_, geometry, lanes_[i], &floor_));
    placing->set_row_placer(placers_.back());
  }
  if (stats_) placed_rows_ = &stats_->counter("placed_rows");
}

std::optional<Example> ElasticBatchIt::take(size_t lane) {
  while (skip_[lane] > 0) {
    --skip_[lane];
    if (!take_one(lane)) {
      skip_[lane] = 0;
      return std::nullopt;
    }
  }
  return take_one(lane);
}

std::optional<Example> ElasticBatchIt::take_one(size_t lane) {
  if (!front_[lane].empty()) {
    Example e = std::move(front_[lane].front());
    front_[lane].pop_front();
    return e;
  }
  if (ended_[lane]) return std::nullopt;
  std::optional<Example> e;
  if (pullers_[lane]->take(e, /*wait=*/true) != BackgroundPuller::Take::kElement) {
    ended_[lane] = 1;
    return std::nullopt;
  }
  ++taken_[lane];
  return e;
}

// Rank r's positions of global batch `step`, in increasing order; nullopt where the
// step has no row, or (drop_remainder) a position has none: the stream's end.
std::optional<Collated> ElasticBatchIt::collate(int64_t step) {
  const int64_t g = o_.global_batch, k = plan_->lanes(), n = o_.world_size;
  const int64_t begin = step * g, end = begin + g;
  std::vector<Example> rows;
  Collated c;
  c.step = step;
  if (batches_) floor_.store(step, std::memory_order_release);
  // The placer lets go of the step's batch whatever becomes of it (its rows keep it).
  struct Finish {
    RowPlacer* batches;
    int64_t step;
    ~Finish() {
      if (batches) batches->finish_batch(step);
    }
  } finish{batches_.get(), step};
  for (int64_t i = begin + ((o_.rank - begin % n) % n + n) % n; i < end; i += n) {
    const size_t lane = static_cast<size_t>((i % k) / n);
    std::optional<Example> e = take(lane);
    if (e) {
      rows.push_back(std::move(*e));
      c.lanes.push_back(lane);
    } else if (o_.drop_remainder) {
      for (size_t j = rows.size(); j-- > 0;) front_[c.lanes[j]].push_front(std::move(rows[j]));
      return std::nullopt;
    }
  }
  if (rows.empty()) return std::nullopt;
  const auto size = static_cast<int64_t>(rows.size());
  BatchBuilder b =
      batches_ ? BatchBuilder(size, label_, batches_.get(), step) : BatchBuilder(size, label_);
  for (const Example& e : rows) b.add(e);
  if (placed_rows_) placed_rows_->fetch_add(b.placed_rows(), std::memory_order_relaxed);
  c.batch = b.finish();
  if (o_.lane_counts) {
    for (size_t lane : c.lanes) ++emitted_[lane];
    c.emitted = emitted_;
  }
  if (collated_) collated_->fetch_add(1, std::memory_order_relaxed);
  return c;
}

void ElasticBatchIt::run_collator() {
  std::unique_lock<std::mutex> lock(mu_);
  const size_t ahead = static_cast<size_t>(o_.prefetch);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (!paused_ && queue_.size() < ahead); });
    if (stop_) return;
    busy_ = true;
    const int64_t step = collate_step_;
    lock.unlock();
    std::optional<Collated> c;
    std::exception_ptr error;
    try {
      c = collate(step);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (c) {
      queue_.push_back(std::move(*c));
      ++collate_step_;
    } else {
      finished_ = true;
      error_ = error;
    }
    cv_.notify_all();
    if (finished_) return;
  }
}

void ElasticBatchIt::stop_collator() {
  if (!collator_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  collator_.join();
  stop_ = false;
}

std::optional<Collated> ElasticBatchIt::next_collated() {
  if (o_.prefetch == 0) {
    if (finished_) return std::nullopt;
    std::optional<Collated> c = collate(collate_step_);
    if (c)
      ++collate_step_;
    else
      finished_ = true;
    return c;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!collator_.joinable() && !finished_) collator_ = std::thread([this] { run_collator(); });
  cv_.wait(lock, [&] { return !queue_.empty() || finished_; });
  if (queue_.empty()) {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::nullopt;
  }
  Collated c = std::move(queue_.front());
  queue_.pop_front();
  cv_.notify_all();
  return c;
}

int64_t ElasticBatchIt::copies_of(int64_t step) const {
  const double whole = std::floor(o_.batch_echo);
  int64_t copies = static_cast<int64_t>(whole);
  const double fraction = o_.batch_echo - whole;
  if (fraction > 0) {
    Rng rng(
        mix64(o_.echo_seed ^ mix64(static_cast<uint64_t>(epoch_) ^ static_cast<uint64_t>(step))));
    if (rng.bernoulli(fraction)) ++copies;
  }
  return copies;
}

std::optional<Example> ElasticBatchIt::next_impl() {
  if (!held_) {
    std::optional<Collated> c = next_collated();
    if (!c) return std::nullopt;
    if (c->step != step_)
      throw_error(ErrorCode::kInternal, label_,
                  "collated step " + std::to_string(c->step) + " where step " +
                      std::to_string(step_) + " is due");
    held_ = std::move(c);
    copies_ = copies_of(step_);
  }
  Example out = held_->batch;
  if (copy_ > 0) out.add_echo(static_cast<int32_t>(copy_));
  if (o_.lane_counts) {
    std::vector<int64_t> counts;
    for (size_t lane = 0; lane < lanes_.size(); ++lane)
      counts.insert(counts.end(), {lanes_[lane], held_->emitted[lane]});
    out.set("__lanes__", Tensor::from_data(DType::kInt64, {static_cast<int64_t>(lanes_.size()), 2},
                                           counts.data(), counts.size() * sizeof(int64_t)));
  }
  if (++copy_ >= copies_) {
    held_.reset();
    ++step_;
    copy_ = 0;
  }
  ++returned_;
  rows_.count(stats(), out);
  return out;
}

nlohmann::json ElasticBatchIt::header() const {
  nlohmann::json by = {{"world_size", given_.world_size}, {"rank", given_.rank}};
  if (given_.consumers_per_rank > 1) {
    by["consumers_per_rank"] = given_.consumers_per_rank;
    by["consumer"] = given_.consumer;
  }
  return {{"format", es::kFormat},
          {"lanes", plan_->lanes()},
          {"global_batch", given_.global_batch},
          {"drop_remainder", o_.drop_remainder},
          {"batch_echo", o_.batch_echo},
          {"plan", es::plan_json(*plan_)},
          {"step", step_},
          {"echo_copy", copy_},
          {"returned", returned_},
          {"saved_by", std::move(by)},
          {"lane_state", nlohmann::json::array()}};
}

// A lane's blob: its queue (the ledger's rows, then what the merge gave back, then its
// puller's queue) and its stages' state.
std::string ElasticBatchIt::save_lane(size_t lane, const std::vector<Example>& ledger,
                                      nlohmann::json& entry) {
  StateWriter w;
  w.begin(es::kLaneTag);
  w.write_i64(lanes_[lane]);
  int64_t queued = 0;
  pullers_[lane]->save(w, [&](const std::vector<Example>& queue, bool input_done, bool failed) {
    if (failed)
      throw_error(ErrorCode::kInvalidArgument, label_, "cannot save a pipeline that has failed");
    w.write_bool(input_done);
    queued = static_cast<int64_t>(ledger.size() + front_[lane].size() + queue.size());
    w.write_i64(queued);
    for (const Example& e : ledger) w.write_example(e);
    for (const Example& e : front_[lane]) w.write_example(e);
    for (const Example& e : queue) w.write_example(e);
  });
  const auto given_back = static_cast<int64_t>(ledger.size() + front_[lane].size());
  entry = {{"lane", lanes_[lane]},
           {"position", taken_[lane] - given_back},
           {"queued", queued},
           {"exhausted", static_cast<bool>(ended_[lane])}};
  if (skip_[lane] > 0) entry["skip"] = skip_[lane];
  return w.take();
}

void ElasticBatchIt::save(StateWriter& w) {
  std::unique_lock<std::mutex> lock(mu_);
  WorkerPause pause(lock, paused_, cv_, cv_, [&] { return !busy_; });
  if (error_)
    throw_error(ErrorCode::kInvalidArgument, label_, "cannot save a pipeline that has failed");
  // The ledger: rows collated but not returned (all copies), by lane, in position order.
  std::vector<std::vector<Example>> ledger(lanes_.size());
  auto put_back = [&](const Collated& c) {
    std::vector<Example> rows = es::row_views(c.batch);
    for (size_t j = 0; j < rows.size(); ++j) ledger[c.lanes[j]].push_back(std::move(rows[j]));
  };
  if (held_) put_back(*held_);
  for (const Collated& c : queue_) put_back(c);
  es::RootState state;
  state.header = header();
  pause.unlocked([&] {
    for (size_t lane = 0; lane < lanes_.size(); ++lane) {
      nlohmann::json entry;
      state.blobs.push_back(save_lane(lane, ledger[lane], entry));
      state.header["lane_state"].push_back(std::move(entry));
    }
  });
  es::write_root(w, state);
}

// Restores an owned lane; the merge goes on from `step`. The lane's next element after
// `skip` dropped ones goes to its first position in `step`, whatever its saved position
// (lanes of workers' snapshots stand at different ones).
void ElasticBatchIt::restore_lane(size_t lane, const std::string& blob, const nlohmann::json& entry,
                                  int64_t step) {
  StateReader r(blob);
  r.expect(es::kLaneTag);
  if (r.read_i64() != lanes_[lane])
    throw_error(ErrorCode::kDataLoss, label_,
                "the blob of lane " + entry.at("lane").dump() + " holds another lane");
  const int64_t skip = entry.value("skip", int64_t{0});
  // The lane's positions before the step: i = jK + lane < step G for j < this.
  const int64_t k = plan_->lanes(), before = step * o_.global_batch - lanes_[lane];
  const int64_t slots = before > 0 ? (before + k - 1) / k : 0;
  pullers_[lane]->restore(r, [&](std::vector<Example>& queue, bool& input_done) {
    input_done = r.read_bool();
    const int64_t n = r.read_i64();
    for (int64_t i = 0; i < n; ++i) queue.push_back(r.read_example());
    // The map's output 0 after the restore is the lane's element after its queue.
    if (!placers_.empty()) placers_[lane]->set_base(slots + n - skip);
  });
  if (!r.at_end())
    throw_error(ErrorCode::kDataLoss, label_,
                "the state of lane " + entry.at("lane").dump() + " has trailing bytes");
  front_[lane].clear();
  ended_[lane] = 0;
  taken_[lane] = entry.at("position").get<int64_t>();
  skip_[lane] = skip;
  emitted_[lane] = 0;
}

// "rank (0 of 2)", or "consumer (rank 0 of 2, consumer 1 of 3)".
std::string ElasticBatchIt::who() const {
  std::string rank = std::to_string(given_.rank) + " of " + std::to_string(given_.world_size);
  if (given_.consumers_per_rank == 1) return "rank (" + rank + ")";
  return "consumer (rank " + rank + ", consumer " + std::to_string(given_.consumer) + " of " +
         std::to_string(given_.consumers_per_rank) + ")";
}

void ElasticBatchIt::restore(StateReader& r) {
  stop_collator();
  floor_.store(kNoPlacing, std::memory_order_release);
  es::RootState state = es::read_root(r, label_);
  const nlohmann::json& h = state.header;
  es::check_plan(h.at("plan"), *plan_, label_);
  if (h.at("global_batch") != given_.global_batch || h.at("drop_remainder") != o_.drop_remainder)
    throw_error(ErrorCode::kInvalidArgument, label_,
                "the state was saved with global batch " + h.at("global_batch").dump() +
                    " (drop_remainder " + h.at("drop_remainder").dump() +
                    ") and this pipeline has " + std::to_string(given_.global_batch) + " (" +
                    (o_.drop_remainder ? "true" : "false") + ")");
  std::vector<int64_t> held;
  std::map<int64_t, size_t> at;
  for (size_t i = 0; i < h.at("lane_state").size(); ++i) {
    held.push_back(h["lane_state"][i].at("lane").get<int64_t>());
    at[held.back()] = i;
  }
  for (int64_t l : lanes_) {
    if (!at.count(l))
      throw_error(ErrorCode::kInvalidArgument, label_,
                  "the state holds lanes " + es::join(held) + " of " +
                      std::to_string(plan_->lanes()) + "; this " + who() + " needs " +
                      es::join(lanes_) +
                      ": restore from merge_elastic_states of every rank's state");
  }
  const int64_t step = h.at("step").get<int64_t>();
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    const size_t i = at[lanes_[lane]];
    restore_lane(lane, state.blobs[i], h["lane_state"][i], step);
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  held_.reset();
  finished_ = false;
  error_ = nullptr;
  step_ = collate_step_ = step;
  copy_ = h.at("echo_copy").get<int64_t>();
  returned_ = h.at("returned").get<int64_t>();
  if (batches_) {
    batches_->reset();
    floor_.store(step_, std::memory_order_release);
  }
}

class ElasticBatchDataset : public Dataset {
 public:
  ElasticBatchDataset(DatasetPtr lane, std::shared_ptr<const ElasticPlan> plan,
                      ElasticBatchOptions o)
      : lane_(std::move(lane)), plan_(std::move(plan)), o_(o) {}
  std::string op_name() const override { return "elastic"; }
  bool owns_threads() const override { return true; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<ElasticBatchIt>(lane_, plan_, o_, ctx, label(), node_stats());
  }

 private:
  DatasetPtr lane_;
  std::shared_ptr<const ElasticPlan> plan_;
  ElasticBatchOptions o_;
};

}  // namespace

DatasetPtr make_elastic_batch(DatasetPtr lane, std::shared_ptr<const ElasticPlan> plan,
                              const ElasticBatchOptions& o) {
  if (!lane || !plan)
    throw_error(ErrorCode::kInvalidArgument, "elastic", "needs the lanes' stages and a plan");
  elastic_lanes_of(plan->lanes(), o.world_size, o.rank, o.consumers_per_rank, o.consumer);
  if (o.consumers_per_rank > 1 && o.batch_echo != 1)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                "batch echo is not available with " + std::to_string(o.consumers_per_rank) +
                    " consumers per rank (DataLoader workers): which batches a worker echoes "
                    "would depend on the number of workers, and a resume on another number "
                    "would repeat other batches; echo before the batch, or use one consumer");
  if (o.global_batch < 1)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                "the global batch must be >= 1, got " + std::to_string(o.global_batch));
  if (!std::isfinite(o.batch_echo) || o.batch_echo < 1)
    throw_error(ErrorCode::kInvalidArgument, "elastic",
                "the batch echo factor must be a number >= 1, got " + std::to_string(o.batch_echo));
  if (o.prefetch < 0 || o.lane_queue < 0)
    throw_error(ErrorCode::kInvalidArgument, "elastic", "prefetch and lane_queue must be >= 0");
  return std::make_shared<ElasticBatchDataset>(std::move(lane), std::move(plan), o);
}

}  // namespace dataecho
