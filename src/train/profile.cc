// `dataecho profile`: pipeline alone (upstream), then train steps on synthetic batches of
// the same shape (downstream); R is their ratio of times per batch.
#include "dataecho/train/profile.h"

#include <cstdio>
#include <utility>

#include "dataecho/core/clock.h"
#include "dataecho/core/rng.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/echo_advice.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/train/input.h"
#include "dataecho/train/model.h"
#include "dataecho/train/optimizer.h"
#include "dataecho/train/torch_batch.h"
#include "task.h"

namespace dataecho::train {
namespace {

// A batch like `like` (same fields, dtypes, shapes) with random values and labels.
Example synthetic_batch(const Example& like, const InputOptions& input, int64_t classes,
                        uint64_t seed) {
  Rng rng(seed);
  Example out;
  const Tensor& image = like.get(input.image_field);
  out.set(input.image_field, Tensor::make(image.dtype(), image.shape(), [&](std::byte* p) {
            if (image.dtype() == DType::kFloat32) {
              auto* f = reinterpret_cast<float*>(p);
              for (int64_t i = 0; i < image.num_elements(); ++i)
                f[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
            } else {
              for (size_t i = 0; i < image.nbytes(); ++i)
                p[i] = static_cast<std::byte>(rng.next_u64() & 0xff);
            }
          }));
  int64_t n = image.shape()[0];
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (auto& l : labels) l = static_cast<int64_t>(rng.uniform(static_cast<uint64_t>(classes)));
  out.set(input.label_field, Tensor::from_vector(labels));
  std::vector<RowMeta> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)].id = i;
  out.set_rows(std::move(rows));
  return out;
}

std::string fmt(double v, int digits = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace

nlohmann::json ProfileReport::to_json() const {
  return {{"stages", stages},
          {"batches", batches},
          {"pipeline_seconds", pipeline_seconds},
          {"upstream_ms_per_batch", upstream_ms_per_batch},
          {"downstream_ms_per_batch", downstream_ms_per_batch},
          {"train_steps_timed", train_steps_timed},
          {"R", r},
          {"slowest_stage", slowest_stage},
          {"slowest_stage_index", slowest_stage_index},
          {"recommended_factor", recommended_factor},
          {"factor_capped", factor_capped},
          {"placement", placement},
          {"recommended_spec", recommended_spec},
          {"recommendations", recommendations},
          {"input", input},
          {"notes", notes}};
}

std::string ProfileReport::to_text() const {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-24s %10s %11s %11s %11s %4s %12s %10s %6s\n", "stage",
                "elements", "busy_ms", "wait_in_ms", "wait_out_ms", "par", "busy_ms/batch",
                "ms/element", "share");
  s += line;
  for (const auto& st : stages) {
    const bool slowest = st["name"].get<std::string>() == slowest_stage;
    std::snprintf(
        line, sizeof line, "%-24s %10lld %11.1f %11.1f %11.1f %4lld %12.3f %10.4f %5.0f%%%s\n",
        st["name"].get<std::string>().c_str(),
        static_cast<long long>(st["elements"].get<int64_t>()), st["busy_ms"].get<double>(),
        st["wait_input_ms"].get<double>(), st["wait_output_ms"].get<double>(),
        static_cast<long long>(st["parallelism"].get<int64_t>()), st["per_batch_ms"].get<double>(),
        st["ms_per_element"].get<double>(), 100 * st["wall_share"].get<double>(),
        st["bottleneck"].get<bool>() ? "  <- bottleneck" : (slowest ? "  <- slowest" : ""));
    s += line;
  }
  s += "\ninput:      " + input + "\n";
  s += "upstream:   " + fmt(upstream_ms_per_batch, 3) + " ms/batch (pipeline alone, " +
       std::to_string(batches) + " batches in " + fmt(pipeline_seconds) + " s)\n";
  s += "downstream: " + fmt(downstream_ms_per_batch, 3) + " ms/batch (train step on synthetic " +
       "batches, " + std::to_string(train_steps_timed) + " timed)\n";
  s += "R = upstream / downstream = " + fmt(r) + "\n";
  s += "slowest stage: " + slowest_stage + "\n";
  if (factor_capped) {
    s += "recommendation: fix the pipeline first (R is beyond what echo alone can close; "
         "see what to change), then echo factor " +
         fmt(recommended_factor, 1) + ", " + placement + "\n";
  } else if (recommended_factor > 1) {
    s += "recommendation: echo factor " + fmt(recommended_factor, 1) + ", " + placement + "\n";
  } else {
    s += "recommendation: " + placement + "\n";
  }
  if (!recommendations.empty()) {
    s += "what to change:\n";
    for (size_t i = 0; i < recommendations.size(); ++i)
      s += "  " + std::to_string(i + 1) + ". " + recommendations[i] + "\n";
  }
  if (!notes.empty()) s += "note: " + notes + "\n";
  return s;
}

namespace {

// The definition profiled: the spec, without its echo stages when asked (R is about the
// pipeline without echo); nullopt for a pipeline from a factory.
std::optional<PipelineDef> profiled_def(const ProfileOptions& o, ProfileReport& rep) {
  if (o.train_pipeline) return std::nullopt;
  if (!o.train_spec) throw Error(ErrorCode::kInvalidArgument, "profile", "no training spec given");
  PipelineDef def = *o.train_spec;
  if (const size_t echoes = def.count("echo"); o.strip_echo && echoes > 0) {
    def = def.without("echo");
    rep.notes = "removed " + std::to_string(echoes) +
                " echo stage(s) from the spec to measure the pipeline without echo";
  }
  return def;
}

// Upstream: the pipeline alone, pulled as fast as it goes. Returns its first batch (the
// shape of the synthetic ones) and its stats; fills rep's pipeline figures.
std::pair<Example, PipelineStats> measure_upstream(const ProfileOptions& o, const Task& task,
                                                   std::unique_ptr<Pipeline> pipeline,
                                                   ProfileReport& rep) {
  int64_t t_start = now_ns();
  std::optional<Example> first = pipeline->next();
  if (!first)
    throw Error(ErrorCode::kInvalidArgument, "profile", "training pipeline: yielded no batch");
  rep.input = task.inspect(*first, "training pipeline").describe();
  int64_t t_first = now_ns();
  int64_t batches = 1, timed = 0;
  int64_t t_end = t_first;
  while ((o.pipeline_batches <= 0 || batches < o.pipeline_batches) &&
         (now_ns() - t_start) < static_cast<int64_t>(o.pipeline_seconds * 1e9)) {
    auto b = pipeline->next();
    if (!b) break;
    ++batches;
    ++timed;
    t_end = now_ns();
  }
  rep.batches = batches;
  rep.pipeline_seconds = (t_end - t_start) / 1e9;
  // The first batch pays for start-up (opening files, filling a shuffle buffer): the rate
  // is taken over the batches after it when there are any.
  rep.upstream_ms_per_batch =
      timed > 0 ? (t_end - t_first) / 1e6 / timed : (t_first - t_start) / 1e6;
  return {std::move(*first), pipeline->stats()};
}

void say(const ProfileOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

// Downstream: the train step on synthetic batches of the shape of `first`: fills rep's
// downstream_ms_per_batch and train_steps_timed. Bounded by o.step_seconds.
void measure_downstream(const ProfileOptions& o, const Task& task, const Example& first,
                        ProfileReport& rep) {
  const InputSignature sig = task.inspect(first, "training pipeline");
  torch::manual_seed(o.seed);
  Classifier model = task.make_model(sig);
  auto optimizer = make_optimizer(model->parameters(), o.optimizer);
  model->train();
  // Images: random values of the first batch's shape, labels within the model's classes;
  // a language model's token blocks: the first batch itself.
  const Example synth = o.model.language_model()
                            ? first
                            : synthetic_batch(first, o.input, o.model.num_classes, o.seed);
  const double bound_s = o.step_seconds >= 0 ? o.step_seconds : o.pipeline_seconds;
  const int64_t steps = std::max<int64_t>(1, o.train_steps);
  say(o, "timing the train step (" + o.model.kind + ", " + std::to_string(o.warmup_steps) +
             " warm-up + up to " + std::to_string(steps) + " steps, at most " + fmt(bound_s) +
             " s)");
  const int64_t t0 = now_ns();
  auto spent_s = [&] { return static_cast<double>(now_ns() - t0) / 1e9; };
  int64_t last_said = t0;
  auto step = [&](const std::string& what) {
    const int64_t s0 = now_ns();
    TorchBatch tb = task.to_torch(synth, sig);
    optimizer->zero_grad();
    torch::Tensor loss = task.loss(*model, tb);
    loss.backward();
    optimizer->step();
    (void)loss.item<float>();
    const int64_t s1 = now_ns();
    if (s1 - last_said > 1'000'000'000) {
      say(o, what + ": " + fmt(static_cast<double>(s1 - s0) / 1e9, 2) + " s, " + fmt(spent_s()) +
                 " s spent");
      last_said = s1;
    }
    return s1 - s0;
  };
  for (int64_t i = 0; i < o.warmup_steps && spent_s() < bound_s; ++i)
    step("warm-up step " + std::to_string(i + 1) + "/" + std::to_string(o.warmup_steps));
  int64_t timed_ns = 0, timed = 0;
  while (timed < steps && (timed == 0 || spent_s() < bound_s)) {
    timed_ns += step("step " + std::to_string(timed + 1) + "/" + std::to_string(steps));
    ++timed;
  }
  rep.train_steps_timed = timed;
  rep.downstream_ms_per_batch = static_cast<double>(timed_ns) / 1e6 / static_cast<double>(timed);
  if (timed < steps) {
    const std::string note = "the train step was timed over " + std::to_string(timed) + " of " +
                             std::to_string(steps) + " steps: the " + fmt(bound_s) +
                             " s bound was spent" +
                             (timed == 1 && rep.downstream_ms_per_batch > bound_s * 1e3
                                  ? " (one step takes longer than the bound)"
                                  : "");
    rep.notes += (rep.notes.empty() ? "" : "; ") + note;
  }
}

}  // namespace

ProfileReport run_profile(const ProfileOptions& o) {
  ProfileReport rep;
  torch::set_num_threads(o.threads);
  // What is trained: images classified, or a language model over token blocks.
  TrainConfig task_config;
  task_config.model = o.model;
  task_config.input = o.input;
  task_config.optimizer = o.optimizer;
  const std::unique_ptr<Task> task = make_task(task_config);
  const std::optional<PipelineDef> def = profiled_def(o, rep);
  std::unique_ptr<Pipeline> pipeline;
  if (o.train_pipeline) {
    pipeline = o.train_pipeline();
  } else {
    BuildOptions bo;
    bo.base_dir = o.train_spec_dir;
    pipeline = def->build(bo);
  }
  say(o, "running the pipeline alone for up to " + fmt(o.pipeline_seconds) + " s" +
             (o.pipeline_batches > 0 ? " or " + std::to_string(o.pipeline_batches) + " batches"
                                     : std::string()));
  // The pipeline is gone before the train steps run (measure_upstream owns it).
  auto [first, stats] = measure_upstream(o, *task, std::move(pipeline), rep);
  say(o, "pipeline alone: " + std::to_string(rep.batches) + " batches in " +
             fmt(rep.pipeline_seconds) + " s (" + fmt(rep.upstream_ms_per_batch, 2) +
             " ms per batch)");
  measure_downstream(o, *task, first, rep);

  // ---- recommendation ----
  EchoAdvice advice = advise_echo(stats.to_json(), def, rep.batches, rep.upstream_ms_per_batch,
                                  rep.downstream_ms_per_batch);
  rep.stages = std::move(advice.stages);
  rep.r = advice.r;
  rep.slowest_stage = std::move(advice.slowest_stage);
  rep.slowest_stage_index = advice.slowest_stage_index;
  rep.recommended_factor = advice.recommended_factor;
  rep.factor_capped = advice.factor_capped;
  rep.placement = std::move(advice.placement);
  rep.recommended_spec = std::move(advice.recommended_spec);
  rep.recommendations = std::move(advice.recommendations);
  return rep;
}

}  // namespace dataecho::train
