#include "dataecho/pipeline.h"

#include "dataecho/core/clock.h"

namespace dataecho {
namespace {
constexpr std::string_view kStateMagic = "dataecho-pipeline-state-v1";
}

Pipeline::Pipeline(DatasetPtr root, std::vector<DatasetPtr> nodes, std::string fingerprint)
    : root_(std::move(root)),
      nodes_(std::move(nodes)),
      fingerprint_(std::move(fingerprint)),
      token_(CancellationToken::make()) {
  IteratorContext ctx;
  ctx.cancel = token_;
  it_ = root_->make_iterator(ctx);
  start_ns_ = now_ns();
}

Pipeline::~Pipeline() {
  token_->cancel();
  it_.reset();
}

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
  it_->save(w);
  return w.take();
}

void Pipeline::restore(std::string_view state) {
  StateReader r(state);
  r.expect(kStateMagic);
  std::string fp = r.read_string();
  if (fp != fingerprint_) {
    throw_error(ErrorCode::kInvalidArgument, "pipeline",
                "the saved state belongs to a different pipeline spec");
  }
  returned_ = r.read_i64();
  it_->restore(r);
  if (!r.at_end()) throw_error(ErrorCode::kDataLoss, "pipeline", "saved state has trailing bytes");
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
