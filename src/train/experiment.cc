// The experiment spec, the rule that derives each cell's training pipeline, and the
// sweep itself (sequential runs, a result file per run, resume by skipping finished runs).
#include "dataecho/train/experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "dataecho/core/error.h"
#include "dataecho/core/redact.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/pipeline_def.h"
#include "dataecho/spec/registry.h"
#include "dataecho/spec/spec_reader.h"
#include "dataecho/train/trainer.h"
#include "experiment_internal.h"

namespace dataecho::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStage = "experiment";

[[noreturn]] void experiment_error(const std::string& message, const std::string& input = "") {
  throw Error(ErrorCode::kInvalidArgument, kStage, message, input);
}

std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string short_variant(EchoVariant v) {
  switch (v) {
    case EchoVariant::kBaseline:
      return "baseline";
    case EchoVariant::kExampleBeforeAugmentation:
      return "before_aug";
    case EchoVariant::kExampleAfterAugmentation:
      return "after_aug";
    case EchoVariant::kBatch:
      return "batch";
    case EchoVariant::kAdaptive:
      return "adaptive";
  }
  return "?";
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string make_cell_id(const ExperimentCell& c) {
  std::string id = short_variant(c.variant);
  if (c.variant == EchoVariant::kAdaptive) {
    id += "-m" + num(c.factor);
    if (c.adaptive_placement != EchoVariant::kExampleBeforeAugmentation)
      id += "-" + short_variant(c.adaptive_placement);
  } else if (c.variant != EchoVariant::kBaseline) {
    id += "-e" + num(c.factor);
  }
  const EchoVariant place = c.variant == EchoVariant::kAdaptive ? c.adaptive_placement : c.variant;
  if (c.variant != EchoVariant::kBaseline && place != EchoVariant::kBatch &&
      c.shuffle_after_echo > 0)
    id += "-sb" + std::to_string(c.shuffle_after_echo);
  if (c.batch_size > 0) id += "-bs" + std::to_string(c.batch_size);
  return id;
}

// Spec file names in a config patch are relative to the experiment spec's folder; the
// base config resolves names against its own folder, so these become absolute (a
// relative result would be taken relative to the base config's folder).
nlohmann::json resolve_patch_paths(nlohmann::json patch, const std::string& dir) {
  for (const char* key : {"train_spec", "eval_spec", "test_spec"}) {
    if (patch.contains(key) && patch[key].is_string())
      patch[key] = fs::absolute(resolve_spec_path(dir, patch[key].get<std::string>()))
                       .lexically_normal()
                       .string();
  }
  return patch;
}

std::vector<double> number_list(SpecObject& o, const std::string& key, std::vector<double> fallback,
                                double min) {
  const nlohmann::json* j = o.raw(key);
  if (!j) return fallback;
  std::vector<double> out;
  if (j->is_number()) {
    out.push_back(j->get<double>());
  } else if (j->is_array() && !j->empty()) {
    for (const auto& v : *j) {
      if (!v.is_number()) throw_spec_error(o.field_path(key), "expected a list of numbers");
      out.push_back(v.get<double>());
    }
  } else {
    throw_spec_error(o.field_path(key), "expected a number or a non-empty list of numbers");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!(out[i] >= min) || !std::isfinite(out[i]))
      throw_spec_error(o.field_path(key) + "[" + std::to_string(i) + "]",
                       "expected a number >= " + num(min) + ", got " + num(out[i]));
  }
  return out;
}

std::vector<int64_t> int_list(SpecObject& o, const std::string& key, std::vector<int64_t> fallback,
                              int64_t min) {
  std::vector<double> values = number_list(o, key, {}, static_cast<double>(min));
  if (values.empty()) return fallback;
  std::vector<int64_t> out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != std::floor(values[i]))
      throw_spec_error(o.field_path(key) + "[" + std::to_string(i) + "]",
                       "expected an integer, got " + num(values[i]));
    out.push_back(static_cast<int64_t>(values[i]));
  }
  return out;
}

EchoVariant placement_from_name(const std::string& path, const std::string& name) {
  EchoVariant v = variant_from_name(name);
  if (v == EchoVariant::kBaseline || v == EchoVariant::kAdaptive)
    throw_spec_error(path,
                     "expected example_before_augmentation, example_after_augmentation or batch");
  return v;
}

std::string fmt_duration(double s) {
  char b[64];
  if (s < 60)
    std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s) / 3600,
                  (static_cast<int>(s) % 3600) / 60);
  return b;
}

}  // namespace

const char* variant_name(EchoVariant v) {
  switch (v) {
    case EchoVariant::kBaseline:
      return "baseline";
    case EchoVariant::kExampleBeforeAugmentation:
      return "example_before_augmentation";
    case EchoVariant::kExampleAfterAugmentation:
      return "example_after_augmentation";
    case EchoVariant::kBatch:
      return "batch";
    case EchoVariant::kAdaptive:
      return "adaptive";
  }
  return "?";
}

EchoVariant variant_from_name(const std::string& name) {
  for (EchoVariant v :
       {EchoVariant::kBaseline, EchoVariant::kExampleBeforeAugmentation,
        EchoVariant::kExampleAfterAugmentation, EchoVariant::kBatch, EchoVariant::kAdaptive}) {
    if (name == variant_name(v)) return v;
  }
  experiment_error("unknown echo variant '" + name +
                   "' (expected baseline, example_before_augmentation, "
                   "example_after_augmentation, batch or adaptive)");
}

namespace {

// $.grid: the echo variants, factors, shuffles, batch sizes and seeds the cells cross.
struct Grid {
  std::vector<EchoVariant> variants;
  std::vector<double> factors;
  std::vector<int64_t> shuffles, batch_sizes, seeds;
  double max_factor = 2;
  EchoVariant placement = EchoVariant::kExampleBeforeAugmentation;
};

// $.name, $.base (a training config file or object), $.overrides, $.out.
void read_base(SpecObject& top, ExperimentSpec& spec, const std::string& base_dir) {
  spec.name = top.get_string("name", "experiment");
  const nlohmann::json* base = top.raw("base");
  if (!base) throw_spec_error("$.base", "expected a training config (a file name or an object)");
  if (base->is_string()) {
    const std::string path = resolve_spec_path(base_dir, base->get<std::string>());
    spec.base_config = load_spec_file(path);
    spec.base_dir = dir_of(path);
  } else if (base->is_object()) {
    spec.base_config = *base;
    spec.base_dir = base_dir;
  } else {
    throw_spec_error("$.base", "expected a training config file name or object");
  }
  if (const nlohmann::json* o = top.raw("overrides")) {
    if (!o->is_object()) throw_spec_error("$.overrides", "expected an object (a merge patch)");
    spec.base_config.merge_patch(resolve_patch_paths(*o, base_dir));
  }
  spec.out = top.get_string("out", "out/" + spec.name);
}

// $.grid (see Grid).
Grid read_grid(SpecObject& top) {
  SpecObject grid = top.get_object("grid", true);
  std::vector<std::string> variant_names = grid.get_strings("variants");
  if (variant_names.empty()) throw_spec_error("$.grid.variants", "expected at least one variant");
  Grid g;
  for (size_t i = 0; i < variant_names.size(); ++i) {
    try {
      g.variants.push_back(variant_from_name(variant_names[i]));
    } catch (const Error& e) {
      throw_spec_error("$.grid.variants[" + std::to_string(i) + "]", e.message());
    }
  }
  g.factors = number_list(grid, "factors", {2}, 1);
  g.shuffles = int_list(grid, "shuffle_after_echo", {0}, 0);
  g.batch_sizes = int_list(grid, "batch_sizes", {0}, 1);
  g.seeds = int_list(grid, "seeds", {1}, 0);
  g.max_factor = grid.get_number("adaptive_max_factor",
                                 *std::max_element(g.factors.begin(), g.factors.end()), 1);
  g.placement = placement_from_name(
      "$.grid.adaptive_placement",
      grid.get_string("adaptive_placement", "example_before_augmentation",
                      {"example_before_augmentation", "example_after_augmentation", "batch"}));
  grid.finish();
  return g;
}

// $.tuning: the learning-rate sweep, or the rates of another experiment's sweep ("from").
void read_tuning(SpecObject& top, ExperimentSpec& spec, const std::string& base_dir,
                 const std::vector<int64_t>& final_seeds) {
  const nlohmann::json* tuning_json = top.raw("tuning");
  if (tuning_json && tuning_json->is_object() && tuning_json->contains("from")) {
    SpecObject t = top.get_object("tuning", true);
    const std::string from = resolve_spec_path(base_dir, t.get_string("from"));
    try {
      spec.tuning.from = std::make_shared<ExperimentSpec>(load_experiment_spec(from));
    } catch (const Error& e) {
      throw_spec_error("$.tuning.from", e.what());
    }
    if (const nlohmann::json* m = t.raw("map")) {
      if (!m->is_object())
        throw_spec_error("$.tuning.map", "expected an object: {\"this cell\": \"its cell\"}");
      for (const auto& [k, v] : m->items()) {
        if (!v.is_string()) throw_spec_error("$.tuning.map." + k, "expected a cell id");
        spec.tuning.map[k] = v.get<std::string>();
      }
    }
    t.finish();
  } else if (tuning_json) {
    SpecObject t = top.get_object("tuning", true);
    spec.tuning.lrs = number_list(t, "lr", {}, 0);
    std::sort(spec.tuning.lrs.begin(), spec.tuning.lrs.end());
    if (spec.tuning.lrs.size() < 3 || spec.tuning.lrs.front() <= 0)
      throw_spec_error("$.tuning.lr",
                       "expected at least 3 learning rates > 0 (log-spaced), so that the "
                       "chosen one can be interior");
    for (size_t i = 1; i < spec.tuning.lrs.size(); ++i)
      if (spec.tuning.lrs[i] == spec.tuning.lrs[i - 1])
        throw_spec_error("$.tuning.lr", "lists " + num(spec.tuning.lrs[i]) + " twice");
    std::vector<int64_t> ts = int_list(t, "seeds", {}, 0);
    if (ts.empty()) throw_spec_error("$.tuning.seeds", "expected at least one tuning seed");
    spec.tuning.seeds.assign(ts.begin(), ts.end());
    spec.tuning.widen = t.get_int("widen", 2, 0);
    t.finish();
    for (int64_t s : final_seeds)
      if (std::find(ts.begin(), ts.end(), s) != ts.end())
        throw_spec_error("$.tuning.seeds",
                         "seed " + std::to_string(s) +
                             " is also a final seed ($.grid.seeds): the final runs must use "
                             "new seeds, not the tuning seeds");
  }
}

// The grid's cells: every batch size x variant x factor x shuffle.
void add_grid_cells(const Grid& g, ExperimentSpec& spec) {
  std::vector<uint64_t> seed_list(g.seeds.begin(), g.seeds.end());
  auto add = [&](ExperimentCell c) {
    c.seeds = seed_list;
    c.adaptive_placement = g.placement;
    c.id = make_cell_id(c);
    spec.cells.push_back(std::move(c));
  };
  for (int64_t bs : g.batch_sizes) {
    for (EchoVariant v : g.variants) {
      ExperimentCell c;
      c.variant = v;
      c.batch_size = bs;
      switch (v) {
        case EchoVariant::kBaseline:
          add(c);
          break;
        case EchoVariant::kBatch:
          for (double f : g.factors) {
            c.factor = f;
            add(c);
          }
          break;
        case EchoVariant::kAdaptive:
          c.factor = g.max_factor;
          for (int64_t sb :
               (g.placement == EchoVariant::kBatch ? std::vector<int64_t>{0} : g.shuffles)) {
            c.shuffle_after_echo = sb;
            add(c);
          }
          break;
        default:
          for (double f : g.factors) {
            for (int64_t sb : g.shuffles) {
              c.factor = f;
              c.shuffle_after_echo = sb;
              add(c);
            }
          }
      }
    }
  }
}

// $.cells: extra cells, each with its own config patch: {"id", "variant", "factor",
// "shuffle_after_echo", "batch_size", "seeds", "overrides", "adaptive_placement",
// "tuning_lr"}.
void add_extra_cells(SpecObject& top, const Grid& g, ExperimentSpec& spec,
                     const std::string& base_dir) {
  if (const nlohmann::json* extra = top.raw("cells")) {
    if (!extra->is_array()) throw_spec_error("$.cells", "expected a list of cell objects");
    for (size_t i = 0; i < extra->size(); ++i) {
      const std::string path = "$.cells[" + std::to_string(i) + "]";
      SpecObject co((*extra)[i], path);
      ExperimentCell c;
      c.variant = variant_from_name(co.get_string("variant", "baseline"));
      c.factor = co.get_number("factor", 2, 1);
      c.shuffle_after_echo = co.get_int("shuffle_after_echo", 0, 0);
      c.batch_size = co.get_int("batch_size", 0, 0);
      c.adaptive_placement =
          placement_from_name(co.field_path("adaptive_placement"),
                              co.get_string("adaptive_placement", variant_name(g.placement)));
      std::vector<int64_t> s = int_list(co, "seeds", g.seeds, 0);
      c.seeds.assign(s.begin(), s.end());
      if (const nlohmann::json* o = co.raw("overrides")) {
        if (!o->is_object())
          throw_spec_error(co.field_path("overrides"), "expected an object (a merge patch)");
        c.overrides = resolve_patch_paths(*o, base_dir);
      }
      c.id = co.get_string("id", make_cell_id(c));
      if (co.raw("tuning_lr")) {
        c.tuning_lrs = number_list(co, "tuning_lr", {}, 0);
        std::sort(c.tuning_lrs.begin(), c.tuning_lrs.end());
        if (c.tuning_lrs.size() < 3 || c.tuning_lrs.front() <= 0)
          throw_spec_error(co.field_path("tuning_lr"),
                           "expected at least 3 learning rates > 0 (log-spaced)");
      }
      co.finish();
      spec.cells.push_back(std::move(c));
    }
  }
}

// No final seed is a tuning seed; no two cells share an id.
void check_cells(const ExperimentSpec& spec) {
  for (size_t i = 0; i < spec.cells.size(); ++i) {
    for (uint64_t s : spec.cells[i].seeds)
      if (std::count(spec.tuning.seeds.begin(), spec.tuning.seeds.end(), s))
        experiment_error("cell " + spec.cells[i].id + ": seed " + std::to_string(s) +
                         " is also a tuning seed: the final runs must use new seeds");
    for (size_t k = 0; k < i; ++k) {
      if (spec.cells[k].id == spec.cells[i].id)
        experiment_error("two cells have the id '" + spec.cells[i].id + "'");
    }
  }
}

}  // namespace

ExperimentSpec experiment_spec_from_json(const nlohmann::json& json, const std::string& base_dir) {
  ExperimentSpec spec;
  spec.source = json;
  try {
    SpecObject top(json, "$");
    top.raw("comment");
    read_base(top, spec, base_dir);
    const Grid g = read_grid(top);
    read_tuning(top, spec, base_dir, g.seeds);
    add_grid_cells(g, spec);
    add_extra_cells(top, g, spec, base_dir);
    top.finish();
    check_cells(spec);
  } catch (const Error& e) {
    if (e.stage() != "spec") throw;
    throw Error(e.code(), kStage, e.message(), e.input());
  }

  // The base config must load, and a sweep needs a target and a budget: runs that never
  // reach the target must end.
  TrainConfig base = train_config_from_json(spec.base_config, spec.base_dir);
  if (!base.target_accuracy && !base.target_loss)
    experiment_error("the base config has no target_accuracy or target_loss: nothing to measure");
  if (base.max_fresh == 0 && base.max_steps == 0 && base.max_seconds == 0)
    experiment_error(
        "the base config has no budget (max_fresh, max_steps or max_seconds): a run that "
        "never reaches the target would not end");
  return spec;
}

ExperimentSpec load_experiment_spec(const std::string& path) {
  nlohmann::json j;
  try {
    j = load_spec_file(path);
  } catch (const Error& e) {
    throw Error(e.code(), kStage, e.message(), e.input().empty() ? path : e.input());
  }
  try {
    return experiment_spec_from_json(j, dir_of(path));
  } catch (const Error& e) {
    if (!e.input().empty()) throw;
    throw Error(e.code(), e.stage(), e.message(), path);
  }
}

nlohmann::json derive_cell_spec(const nlohmann::json& base_train_spec, const ExperimentCell& cell) {
  if (!base_train_spec.is_object() || !base_train_spec.contains("stages") ||
      !base_train_spec["stages"].is_array())
    experiment_error("cell " + cell.id + ": the training spec has no \"stages\" list");
  PipelineDef def = PipelineDef::from_json(base_train_spec);
  derive_cell_def(def, cell);
  return def.to_json();
}

void derive_cell_def(PipelineDef& def, const ExperimentCell& cell) {
  // The augmentation map, and a map that decodes and augments at once, by what their
  // functions declare (MapFnTraits), not by their names.
  const Registry& reg = registry();
  std::optional<size_t> batch = def.find("batch"), augment, fused;
  const auto& stages = def.stages();
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].op == "echo")
      experiment_error("cell " + cell.id +
                       ": the base training spec already has an echo stage "
                       "($.stages[" +
                       std::to_string(i) + "]); the experiment inserts its own");
    if (stages[i].op != "map") continue;
    const MapFnTraits t = reg.traits_of(stages[i].fn());
    if (!t.augmentation) continue;
    if (!t.decodes && !augment) augment = i;
    if (t.decodes && !fused) fused = i;
  }
  if (!batch) experiment_error("cell " + cell.id + ": the training spec has no batch stage");
  if (cell.batch_size > 0) def.mutable_stages()[*batch].options["size"] = cell.batch_size;
  if (cell.variant == EchoVariant::kBaseline) return;

  const EchoVariant place =
      cell.variant == EchoVariant::kAdaptive ? cell.adaptive_placement : cell.variant;
  EchoStageOptions echo;
  if (cell.variant == EchoVariant::kAdaptive) {
    echo.adaptive = true;
    echo.max_factor = cell.factor;
  } else {
    echo.factor = cell.factor;
  }
  PipelineDef echo_def;
  echo_def.echo(echo);
  if (place != EchoVariant::kBatch && cell.shuffle_after_echo > 0)
    echo_def.shuffle({.buffer = cell.shuffle_after_echo});
  size_t at = 0;
  if (place == EchoVariant::kBatch) {
    at = *batch + 1;
  } else {
    if (place == EchoVariant::kExampleBeforeAugmentation) {
      if (fused && (!augment || *fused < *augment))
        experiment_error("cell " + cell.id +
                         ": cannot echo before augmentation: the spec decodes and augments in "
                         "one map (" +
                         stages[*fused].fn() + " at $.stages[" + std::to_string(*fused) +
                         "]); split it into decode_image and augment");
      at = augment ? *augment : *batch;
    } else {
      std::optional<size_t> a = augment;
      if (fused && (!a || *fused < *a)) a = fused;
      at = a ? *a + 1 : *batch;
    }
    if (at > *batch)
      experiment_error("cell " + cell.id +
                       ": the augment map comes after the batch stage; "
                       "cannot place an example echo there");
  }
  def.insert(at, echo_def.stages());
}

namespace detail {

std::string run_dir(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed) {
  fs::path dir = fs::path(spec.out) / "cells" / cell.id;
  if (cell.tuning_run) dir /= fs::path("tune") / ("lr-" + num(cell.lr.value_or(0)));
  return (dir / ("seed-" + std::to_string(seed))).string();
}

// The cell's TrainConfig for one seed, and the JSON that identifies it (compared with a
// finished run's to decide whether it can be skipped).
TrainConfig cell_config(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed,
                        const ExperimentOptions& options, nlohmann::json* identity) {
  nlohmann::json cfg = spec.base_config;
  if (!cell.overrides.is_null()) cfg.merge_patch(cell.overrides);
  if (cell.lr) cfg["optimizer"]["lr"] = *cell.lr;
  TrainConfig c = train_config_from_json(cfg, spec.base_dir);
  c.train_spec = derive_cell_spec(c.train_spec, cell);
  c.seed = seed;
  c.out = run_dir(spec, cell, seed);
  c.resume = false;
  if (!options.progress.empty()) c.progress = options.progress;
  if (options.threads) c.threads = *options.threads;
  if (identity) {
    nlohmann::json id = train_config_to_json(c);
    for (const char* k : {"out", "progress", "progress_seconds", "threads", "resume"}) id.erase(k);
    *identity = id;
  }
  return c;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return nullptr;
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error(ErrorCode::kIo, kStage, "cannot write", tmp);
    out << redact_json_urls(j).dump(2) << "\n";  // no credentials in a run's files
    if (!out) throw Error(ErrorCode::kIo, kStage, "cannot write", tmp);
  }
  fs::rename(tmp, path);
}

}  // namespace detail

namespace {

enum class RunOutcome { kTrained, kFailed, kInterrupted, kDryRun };

std::string load_average() {  // "0.52 0.58 0.59": 1, 5 and 15 minutes
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return in ? a + " " + b + " " + c : "";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

// Where and when a run ran: the commit (DATAECHO_COMMIT, which the experiment scripts
// set from git), the machine's size and its load before and after the run.
nlohmann::json provenance(const std::string& load_before, const std::string& started) {
  const char* commit = std::getenv("DATAECHO_COMMIT");
  return {{"commit", commit && *commit ? commit : "unknown (set DATAECHO_COMMIT)"},
          {"started", started},
          {"finished", utc_now()},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"load_average_before", load_before},
          {"load_average_after", load_average()}};
}

// Trains one run of `cell` (the cell's config for `seed`) and writes its result.json.
// A failure is logged and returned in `error`; the sweep goes on.
RunOutcome train_run(const ExperimentSpec& spec, const ExperimentCell& cell, uint64_t seed,
                     const ExperimentOptions& options,
                     const std::function<void(const std::string&)>& log, std::string* error) {
  try {
    nlohmann::json identity;
    TrainConfig c = detail::cell_config(spec, cell, seed, options, &identity);
    validate_train_config(c);
    if (options.dry_run) {
      log("  dry run: " + nlohmann::json(c.train_spec["stages"]).dump() +
          (cell.lr ? " lr " + num(*cell.lr) : ""));
      return RunOutcome::kDryRun;
    }
    fs::remove_all(c.out);  // a stale, unfinished run starts over
    const std::string dir = c.out;
    const std::string load_before = load_average(), started = utc_now();
    Trainer trainer(std::move(c));
    std::jthread watcher;
    if (options.stop) {
      watcher = std::jthread([&trainer, stop = options.stop](std::stop_token st) {
        while (!st.stop_requested()) {
          if (stop->load()) trainer.request_stop();
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
    }
    TrainResult r = trainer.run();
    if (watcher.joinable()) {
      watcher.request_stop();
      watcher.join();
    }
    if (r.stop_reason == "interrupted") {
      log("  interrupted: this run is not recorded; rerun the experiment to resume");
      return RunOutcome::kInterrupted;
    }
    nlohmann::json summary = r.to_json();
    summary.erase("pipeline_stats");  // in summary.json; keep result files small
    detail::write_json_file((fs::path(dir) / "result.json").string(),
                            {{"cell", cell.id},
                             {"seed", seed},
                             {"config", identity},
                             {"provenance", provenance(load_before, started)},
                             {"summary", summary}});
    char line[512];
    if (r.reached_target) {
      std::snprintf(line, sizeof line,
                    "  target after %lld fresh, %lld steps, %.1f s training (%.1f s wall) | "
                    "achieved echo %.2f | R %.2f",
                    static_cast<long long>(*r.fresh_to_target),
                    static_cast<long long>(*r.steps_to_target), *r.seconds_to_target,
                    *r.wall_seconds_to_target, r.achieved_echo, r.r_estimate);
    } else {
      std::snprintf(line, sizeof line,
                    "  no target (%s) after %lld fresh, %lld steps, accuracy %.4f | achieved "
                    "echo %.2f | R %.2f",
                    r.stop_reason.c_str(), static_cast<long long>(r.fresh),
                    static_cast<long long>(r.steps), r.final_eval ? r.final_eval->accuracy : 0.0,
                    r.achieved_echo, r.r_estimate);
    }
    log(line);
    return RunOutcome::kTrained;
  } catch (const std::exception& e) {
    *error = "seed " + std::to_string(seed) +
             (cell.tuning_run ? " (tuning, lr " + num(*cell.lr) + ")" : "") + ": " + e.what();
    log(std::string("  FAILED (the sweep goes on): ") + e.what());
    return RunOutcome::kFailed;
  }
}

}  // namespace

ExperimentReport run_experiment(const ExperimentSpec& spec_in, const ExperimentOptions& options) {
  using Clock = std::chrono::steady_clock;
  auto log = options.log ? options.log : [](const std::string& s) { std::cerr << s << "\n"; };
  ExperimentSpec spec = spec_in;  // the cells get their tuned learning rates
  std::error_code ec;
  fs::create_directories(spec.out, ec);
  if (ec)
    throw Error(ErrorCode::kIo, kStage, "cannot create the output directory: " + ec.message(),
                spec.out);
  detail::write_json_file((fs::path(spec.out) / "experiment.json").string(), spec.source);

  int64_t total = 0;
  for (const auto& c : spec.cells) total += static_cast<int64_t>(c.seeds.size());

  ExperimentReport report;
  std::map<std::string, std::vector<std::string>> errors;  // cell id -> messages
  double trained_seconds = 0;
  int64_t trained = 0, failed = 0, skipped = 0;
  const size_t n_cells = spec.cells.size();
  auto eta = [&](int64_t left) {
    if (trained == 0) return std::string("ETA ?");
    return "ETA " +
           fmt_duration(trained_seconds / static_cast<double>(trained) * static_cast<double>(left));
  };
  auto account = [&](RunOutcome o, Clock::time_point t0, const std::string& cell_id,
                     const std::string& error) {
    if (o == RunOutcome::kTrained) {
      trained_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      ++trained;
    } else if (o == RunOutcome::kFailed) {
      ++failed;
      errors[cell_id].push_back(error);
    } else if (o == RunOutcome::kInterrupted) {
      report.interrupted = true;
    }
  };

  // Cell by cell: its learning rate from its tuning runs (with tuning), then its final
  // runs; whatever is done already (the same config) is skipped. One cell is complete
  // before the next starts, so a sweep stopped part-way has whole cells to report.
  int64_t final_left = 0;
  for (const auto& c : spec.cells) final_left += static_cast<int64_t>(c.seeds.size());
  int64_t final_index = 0;
  const std::string n_str = std::to_string(n_cells);
  auto tune_head = [&](size_t i) {  // "[tune 2/14] before_aug-e4-sb1000"
    return "[tune " + std::to_string(i + 1) + "/" + n_str + "] " + spec.cells[i].id;
  };
  for (size_t i = 0; i < n_cells && !report.interrupted; ++i) {
    ExperimentCell& cell = spec.cells[i];
    bool untunable = false;
    while (spec.tuning.enabled() || spec.tuning.from) {
      TuningState st = tuning_state(spec, cell);
      if (st.chosen) {
        cell.lr = st.chosen;
        log(tune_head(i) + ": learning rate " + num(*st.chosen) +
            (st.note.empty() ? "" : " (" + st.note + ")"));
        break;
      }
      if (st.pending.empty() || options.dry_run) {
        if (!st.note.empty()) errors[cell.id].push_back("tuning: " + st.note);
        for (double lr : st.pending) log(tune_head(i) + " lr " + num(lr) + ": to run");
        untunable = true;
        break;
      }
      bool broken = false;
      for (double lr : st.pending) {
        const ExperimentCell tc = detail::tuning_cell(cell, lr);
        for (uint64_t seed : spec.tuning.seeds) {
          if (detail::finished_summary(spec, tc, seed).is_object()) {
            ++skipped;
            continue;
          }
          if (options.stop && options.stop->load()) report.interrupted = true;
          if (report.interrupted) break;
          log(tune_head(i) + " lr " + num(lr) + " seed " + std::to_string(seed));
          const auto t0 = Clock::now();
          std::string error;
          RunOutcome o = train_run(spec, tc, seed, options, log, &error);
          account(o, t0, cell.id, error);
          broken = broken || o == RunOutcome::kFailed;
        }
        if (report.interrupted || broken) break;
      }
      if (report.interrupted) break;
      if (broken) {  // a config that cannot train: its final runs cannot either
        untunable = true;
        break;
      }
    }
    if (report.interrupted) break;
    if (untunable) {
      final_left -= static_cast<int64_t>(cell.seeds.size());
      continue;
    }
    for (uint64_t seed : cell.seeds) {
      if (detail::finished_summary(spec, cell, seed).is_object()) {
        ++skipped;
        --final_left;
        continue;
      }
      if (options.stop && options.stop->load()) report.interrupted = true;
      if (report.interrupted) break;
      ++final_index;
      // This sweep's final runs: those run so far, this one and those left after it.
      const int64_t sweep_runs = final_index + final_left - 1;
      char head[512];
      std::snprintf(head, sizeof head,
                    "[cell %zu/%zu] %s seed %llu | run %lld/%lld of this sweep | %s", i + 1,
                    n_cells, cell.id.c_str(), static_cast<unsigned long long>(seed),
                    static_cast<long long>(final_index), static_cast<long long>(sweep_runs),
                    eta(final_left).c_str());
      --final_left;
      log(head);
      const auto t0 = Clock::now();
      std::string error;
      account(train_run(spec, cell, seed, options, log, &error), t0, cell.id, error);
    }
  }
  if (skipped > 0)
    log("experiment " + spec.name + ": " + std::to_string(skipped) + " runs already done in " +
        spec.out + " (skipped)");
  const bool interrupted = report.interrupted;
  report = detail::collect(spec, options, errors, std::move(report));
  report.interrupted = interrupted;
  report.runs_total = total;
  report.runs_trained = trained;
  report.runs_skipped = skipped;
  report.runs_failed = failed;
  return report;
}

ExperimentReport report_experiment(const ExperimentSpec& spec, const ExperimentOptions& options) {
  ExperimentReport report = detail::collect(spec, options, {}, ExperimentReport{});
  for (const auto& c : spec.cells) report.runs_total += static_cast<int64_t>(c.seeds.size());
  return report;
}

}  // namespace dataecho::train
