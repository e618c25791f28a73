#include "dataecho/core/pipeline.h"

#include <exception>
#include <optional>
#include <string>

#include "dataecho/core/clock.h"

namespace dataecho {
namespace {
// v3 (2026-12-03): v2 and, after the count of elements returned, what the tuner learned
// (a TunerMemo as JSON text; "" when no node has an "auto" setting). v2: the fingerprint
// is a fixed hash of the canonical spec (PipelineDef). v1 (before 2026-11-30): std::hash
// of the spec's JSON, which is implementation-defined; v1 states still restore where the
// pipeline knows its v1 fingerprint. v1 and v2 states restore without a memo: the tuner
// goes on from where it is.
constexpr std::string_view kStateMagic = Pipeline::kStateFormat;
constexpr std::string_view kStateMagicV2 = "dataecho-pipeline-state-v2";
constexpr std::string_view kStateMagicV1 = "dataecho-pipeline-state-v1";

std::optional<TunerMemo> read_memo(const std::string& text) {
  if (text.empty()) return std::nullopt;
  try {
    return TunerMemo::from_json(nlohmann::json::parse(text));
  } catch (const std::exception& e) {
    throw_error(ErrorCode::kDataLoss, "pipeline",
                std::string("the saved state's tuner memo cannot be read: ") + e.what());
  }
}
}  // namespace

Pipeline::Pipeline(DatasetPtr root, std::vector<DatasetPtr> nodes, std::string fingerprint,
                   std::string v1_fingerprint, TunerOptions tuning)
    : root_(std::move(root)),
      nodes_(std::move(nodes)),
      fingerprint_(std::move(fingerprint)),
      v1_fingerprint_(std::move(v1_fingerprint)),
      token_(CancellationToken::make()),
      tuner_(std::make_shared<Tuner>(tuning, root_->node_stats())) {
  IteratorContext ctx;
  ctx.cancel = token_;
  ctx.tuner = tuner_;
  it_ = root_->make_iterator(ctx);
  start_ns_ = now_ns();
}

Pipeline::~Pipeline() {
  token_->cancel();
  tuner_->stop();  // before the iterators that listen to its knobs go
  it_.reset();
}

nlohmann::json Pipeline::tuning() const { return tuner_->report(); }

std::optional<TunerChange> Pipeline::tune_step() { return tuner_->step(); }

void Pipeline::cancel() { token_->cancel(); }

std::optional<Example> Pipeline::next() {
  if (failed_) return std::nullopt;
  try {
    auto e = it_->next();
    if (e) ++returned_;
    return e;
  } catch (...) {
    failed_ = true;
    throw;
  }
}

std::string Pipeline::save() {
  if (failed_)
    throw_error(ErrorCode::kInvalidArgument, "pipeline", "cannot save a pipeline that has failed");
  StateWriter w;
  w.begin(kStateMagic);
  w.write_string(fingerprint_);
  w.write_i64(returned_);
  const std::optional<TunerMemo> memo = tuner_->memo();
  w.write_string(memo ? memo->to_json().dump() : "");
  it_->save(w);
  return w.take();
}

void Pipeline::restore(std::string_view state) {
  StateReader r(state);
  const std::string format = r.read_string();
  if (format != kStateMagic && format != kStateMagicV2 && format != kStateMagicV1) {
    const std::string shown = format.size() > 64 ? format.substr(0, 64) + "..." : format;
    throw_error(ErrorCode::kInvalidArgument, "pipeline",
                "the saved state is of format '" + shown + "': this dataecho reads " +
                    std::string(kStateMagicV1) + ", " + std::string(kStateMagicV2) + " and " +
                    std::string(kStateMagic) +
                    (format.rfind("dataecho-pipeline-state-v", 0) == 0
                         ? " (a state from a newer dataecho?)"
                         : " (not a dataecho pipeline state?)"));
  }
  std::string fp = r.read_string();
  if (fp != (format == kStateMagicV1 ? v1_fingerprint_ : fingerprint_)) {
    throw_error(ErrorCode::kInvalidArgument, "pipeline",
                "the saved state belongs to a different pipeline spec");
  }
  const int64_t returned = r.read_i64();
  const std::optional<TunerMemo> memo =
      format == kStateMagic ? read_memo(r.read_string()) : std::nullopt;
  it_->restore(r);
  if (!r.at_end()) throw_error(ErrorCode::kDataLoss, "pipeline", "saved state has trailing bytes");
  returned_ = returned;
  if (memo) tuner_->resume(*memo);
}

PipelineStats Pipeline::stats() const {
  PipelineStats s;
  for (const auto& n : nodes_) {
    if (n->node_stats()) s.add(n->node_stats());
  }
  s.set_wall_ns(now_ns() - start_ns_);
  return s;
}

}  // namespace dataecho
