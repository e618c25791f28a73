// The trainer's records as JSON, each by its table of fields (json_fields.h): an
// evaluation (evals.jsonl, the checkpoint) and a run's result (summary.json, the
// experiment runner's result files).
#include "dataecho/train/trainer.h"

#include <cmath>
#include <functional>
#include <type_traits>

#include "dataecho/core/error.h"
#include "dataecho/spec/spec_reader.h"
#include "json_fields.h"

namespace dataecho::train {

double EvalRecord::bits_per_byte() const { return loss / std::log(2.0); }

namespace {

using json_fields::Field;
using json_fields::member;
using R = TrainResult;

// The language model's figures are written only for a language model's run (the
// classifiers' summaries stay as they were).
bool language_model(const R& r) { return r.final_eval && r.final_eval->tokens > 0; }
bool split(const R& r) { return !r.train_cpus.empty(); }

// The fields of an evaluation (evals.jsonl, the checkpoint, summary.json's final_eval),
// each required but raw_reads and a language model's tokens.
const std::vector<Field<EvalRecord>>& eval_fields() {
  using E = EvalRecord;
  constexpr bool kRequired = true;
  static const std::vector<Field<E>> fields = {
      member<E, &E::step>("", {.name = "step", .required = kRequired}),
      member<E, &E::fresh>("", {.name = "fresh", .required = kRequired}),
      member<E, &E::echoed>("", {.name = "echoed", .required = kRequired}),
      member<E, &E::raw_reads>("", {.name = "raw_reads"}),
      member<E, &E::train_seconds>("", {.name = "train_seconds", .required = kRequired}),
      member<E, &E::wall_seconds>("", {.name = "wall_seconds", .required = kRequired}),
      member<E, &E::accuracy>("", {.name = "accuracy", .required = kRequired}),
      member<E, &E::loss>("", {.name = "loss", .required = kRequired}),
      member<E, &E::examples>("", {.name = "examples", .required = kRequired}),
      member<E, &E::train_loss>("", {.name = "train_loss", .required = kRequired}),
      member<E, &E::lr>("", {.name = "lr", .required = kRequired}),
      // A language model's: its target tokens, and the loss in bits per byte.
      member<E, &E::tokens>("", {.name = "tokens", .written = Written::kWhenGiven}),
      {"",
       {.name = "bits_per_byte"},
       [](const E& e) { return nlohmann::json(e.bits_per_byte()); },
       nullptr,
       [](const E& e) { return e.tokens > 0; }},
  };
  return fields;
}

// An evaluation, null when there is none.
nlohmann::json eval_json(const std::optional<EvalRecord>& e) {
  return e ? e->to_json() : nlohmann::json(nullptr);
}

// The test set's evaluation, made when the first of its figures is read.
EvalRecord& test_eval(R& r) {
  if (!r.test_eval) r.test_eval.emplace();
  return *r.test_eval;
}

// "cpu_split": {"train": [cpus], "pipeline": [cpus]}.
std::vector<int> cpu_list(SpecObject& o, const std::string& key) {
  const nlohmann::json* j = o.raw(key);
  std::vector<int> cpus;
  if (!j) return cpus;
  if (!j->is_array()) throw_spec_error(o.field_path(key), "expected a list of CPU numbers");
  for (const auto& v : *j) {
    if (!v.is_number_integer())
      throw_spec_error(o.field_path(key),
                       "expected a list of CPU numbers, got " + describe_json(v));
    cpus.push_back(v.get<int>());
  }
  return cpus;
}

// Counts of rows and reads, and how far the run went.
std::vector<Field<R>> count_fields() {
  return {
      member<R, &R::stop_reason>("", {.name = "stop_reason"}),
      member<R, &R::reached_target>("", {.name = "reached_target"}),
      member<R, &R::steps>("", {.name = "steps"}),
      member<R, &R::fresh>("", {.name = "fresh"}),
      member<R, &R::echoed>("", {.name = "echoed"}),
      member<R, &R::raw_reads>("", {.name = "raw_reads"}),
      member<R, &R::fresh_by_echo_index>("", {.name = "fresh_by_echo_index"}),
      member<R, &R::batch_duplicates>("", {.name = "batch_duplicates"}),
      {"",
       {.name = "batch_duplicate_rate"},
       [](const R& r) {
         const int64_t rows = r.fresh + r.echoed;
         return nlohmann::json(
             rows > 0 ? static_cast<double>(r.batch_duplicates) / static_cast<double>(rows) : 0.0);
       }},
      member<R, &R::raw_reads_to_target>("", {.name = "raw_reads_to_target"}),
      member<R, &R::steps_to_target>("", {.name = "steps_to_target"}),
      member<R, &R::fresh_to_target>("", {.name = "fresh_to_target"}),
      member<R, &R::seconds_to_target>("", {.name = "seconds_to_target"}),
      member<R, &R::wall_seconds_to_target>("", {.name = "wall_seconds_to_target"}),
  };
}

// Where the time went.
std::vector<Field<R>> time_fields() {
  return {
      member<R, &R::wall_seconds>("", {.name = "wall_seconds"}),
      member<R, &R::startup_seconds>("", {.name = "startup_seconds"}),
      member<R, &R::peak_rss_mib>("", {.name = "peak_rss_mib"}),
      member<R, &R::cpu_seconds>("", {.name = "cpu_seconds"}),
      {"",
       {.name = "cpu_split", .type = OptionType::kObject},
       [](const R& r) {
         return nlohmann::json{{"train", r.train_cpus}, {"pipeline", r.pipeline_cpus}};
       },
       [](SpecObject& o, const OptionDecl& d, R& r) {
         SpecObject cpus = o.get_object(d.name);
         r.train_cpus = cpu_list(cpus, "train");
         r.pipeline_cpus = cpu_list(cpus, "pipeline");
       },
       split},
      member<R, &R::snapshot_seconds>("", {.name = "snapshot_seconds"}),
      member<R, &R::eval_mode>("", {.name = "eval_mode"}),
      member<R, &R::train_seconds>("", {.name = "train_seconds"}),
      member<R, &R::wait_seconds>("", {.name = "wait_seconds"}),
      member<R, &R::compute_seconds>("", {.name = "compute_seconds"}),
      member<R, &R::eval_seconds>("", {.name = "eval_seconds"}),
      member<R, &R::r_estimate>("", {.name = "r_estimate"}),
      member<R, &R::pipeline_bound>("", {.name = "pipeline_bound"}),
      member<R, &R::achieved_echo>("", {.name = "achieved_echo"}),
      {"",
       {.name = "steps_per_second"},
       [](const R& r) {
         return nlohmann::json(r.train_seconds > 0 ? r.steps / r.train_seconds : 0.0);
       }},
  };
}

// A figure of an evaluation the run may not have (final_eval, test_eval): null without
// it. `Figure`: a member or an accessor of EvalRecord.
template <auto Eval, auto Figure>
nlohmann::json figure_of(const R& r) {
  const std::optional<EvalRecord>& e = r.*Eval;
  return e ? nlohmann::json(std::invoke(Figure, *e)) : nlohmann::json(nullptr);
}

// A figure of the test set's evaluation read back into it (the summary holds no more of
// it than its figures).
template <auto Figure>
void read_test_figure(SpecObject& o, const OptionDecl& d, R& r) {
  std::optional<std::remove_cvref_t<decltype(std::declval<EvalRecord&>().*Figure)>> v;
  json_fields::read_value(o, d, v);
  if (v) test_eval(r).*Figure = *v;
}

// The last evaluation, and its figures.
std::vector<Field<R>> final_fields() {
  constexpr auto final_eval = &R::final_eval;
  return {
      {"",
       {.name = "final_eval", .type = OptionType::kObject},
       [](const R& r) { return eval_json(r.final_eval); },
       [](SpecObject& o, const OptionDecl& d, R& r) {
         const nlohmann::json* j = o.raw(d.name);
         if (j && !j->is_null()) r.final_eval = EvalRecord::from_json(*j);
       }},
      {"", {.name = "final_accuracy"}, &figure_of<final_eval, &EvalRecord::accuracy>},
      {"", {.name = "final_loss"}, &figure_of<final_eval, &EvalRecord::loss>},
      {"",
       {.name = "final_bits_per_byte"},
       &figure_of<final_eval, &EvalRecord::bits_per_byte>,
       nullptr,
       language_model},
  };
}

// The test set's figures: of test_eval, the model's that test_model names.
std::vector<Field<R>> test_fields() {
  constexpr auto test = &R::test_eval;
  return {
      {"",
       {.name = "test_accuracy"},
       &figure_of<test, &EvalRecord::accuracy>,
       &read_test_figure<&EvalRecord::accuracy>},
      {"",
       {.name = "test_examples"},
       &figure_of<test, &EvalRecord::examples>,
       &read_test_figure<&EvalRecord::examples>},
      {"",
       {.name = "test_model"},
       [](const R& r) {
         return r.test_eval ? nlohmann::json(r.test_model) : nlohmann::json(nullptr);
       },
       [](SpecObject& o, const OptionDecl& d, R& r) {
         std::optional<std::string> model;
         json_fields::read_value(o, d, model);
         if (model) r.test_model = *model;
       }},
      {"",
       {.name = "test_loss"},
       &figure_of<test, &EvalRecord::loss>,
       &read_test_figure<&EvalRecord::loss>,
       language_model},
      {"",
       {.name = "test_bits_per_byte"},
       &figure_of<test, &EvalRecord::bits_per_byte>,
       nullptr,
       language_model},
  };
}

// The run as a whole: ranks, the input, the model, the pipeline.
std::vector<Field<R>> run_fields() {
  return {
      // The count of `evals`, which evals.jsonl holds (not the summary).
      {"",
       {.name = "evaluations"},
       [](const R& r) { return nlohmann::json(static_cast<int64_t>(r.evals.size())); }},
      member<R, &R::world_size>("", {.name = "world_size"}),
      member<R, &R::communication_seconds>("", {.name = "communication_seconds"}),
      member<R, &R::ranks_identical>("", {.name = "ranks_identical"}),
      member<R, &R::input>("", {.name = "input"}),
      member<R, &R::parameters>("", {.name = "parameters"}),
      member<R, &R::pipeline_stats>("", {.name = "pipeline_stats"}),
      member<R, &R::pipeline_scale>("", {.name = "pipeline_scale", .written = Written::kWhenGiven}),
  };
}

// The fields of summary.json. Written only (null `read`): the figures derived from the
// others (rates, the evaluations' count, the final and test evaluation's figures).
const std::vector<Field<R>>& result_fields() {
  static const std::vector<Field<R>> fields = [] {
    std::vector<Field<R>> all;
    for (auto part : {count_fields, time_fields, final_fields, test_fields, run_fields})
      for (Field<R>& f : part()) all.push_back(std::move(f));
    return all;
  }();
  return fields;
}

}  // namespace

nlohmann::json EvalRecord::to_json() const {
  return json_fields::write_fields(*this, eval_fields());
}

EvalRecord EvalRecord::from_json(const nlohmann::json& j) {
  return json_fields::read_object(j, eval_fields(), "evaluation");
}

nlohmann::json TrainResult::to_json() const {
  return json_fields::write_fields(*this, result_fields());
}

TrainResult TrainResult::from_json(const nlohmann::json& j) {
  return json_fields::read_object(j, result_fields(), "train result");
}

}  // namespace dataecho::train
