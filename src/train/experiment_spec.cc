// The experiment spec: reading it (the base config, the grid of echo variants, factors,
// shuffles, batch sizes and seeds, learning-rate tuning, extra cells) into the cells a
// sweep runs (experiment.cc).
#include "dataecho/train/experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "dataecho/core/error.h"
#include "dataecho/spec/build.h"
#include "dataecho/spec/spec_reader.h"
#include "experiment_internal.h"

namespace dataecho::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStage = "experiment";

using detail::experiment_error;

std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// "before_aug", or with an echo_around stage "before_pack".
std::string short_variant(EchoVariant v, const std::string& around) {
  const std::string what = around.empty() ? "aug" : around;
  switch (v) {
    case EchoVariant::kBaseline:
      return "baseline";
    case EchoVariant::kExampleBeforeAugmentation:
      return "before_" + what;
    case EchoVariant::kExampleAfterAugmentation:
      return "after_" + what;
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
  std::string id = c.variant == EchoVariant::kAdaptive && c.adaptive_auto
                       ? std::string("auto")
                       : short_variant(c.variant, c.echo_around);
  if (c.variant == EchoVariant::kAdaptive) {
    id += "-m" + num(c.factor);
    if (c.adaptive_placement != EchoVariant::kExampleBeforeAugmentation)
      id += "-" + short_variant(c.adaptive_placement, c.echo_around);
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
  // Shorter names, for an experiment whose example echoes go around a stage other than
  // an augmentation ($.echo_around: "pack").
  if (name == "example_before") return EchoVariant::kExampleBeforeAugmentation;
  if (name == "example_after") return EchoVariant::kExampleAfterAugmentation;
  for (EchoVariant v :
       {EchoVariant::kBaseline, EchoVariant::kExampleBeforeAugmentation,
        EchoVariant::kExampleAfterAugmentation, EchoVariant::kBatch, EchoVariant::kAdaptive}) {
    if (name == variant_name(v)) return v;
  }
  experiment_error("unknown echo variant '" + name +
                   "' (expected baseline, example_before_augmentation (or example_before), "
                   "example_after_augmentation (or example_after), batch or adaptive)");
}

namespace {

// $.grid: the echo variants, factors, shuffles, batch sizes and seeds the cells cross;
// $.echo_around, the stage example echoes go around.
struct Grid {
  std::vector<EchoVariant> variants;
  std::vector<double> factors;
  std::vector<int64_t> shuffles, batch_sizes, seeds;
  double max_factor = 2;
  EchoVariant placement = EchoVariant::kExampleBeforeAugmentation;
  bool adaptive_auto = false;
  std::string echo_around;
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

// $.grid (see Grid); it may be left out when $.cells lists every cell (each with its
// seeds).
Grid read_grid(SpecObject& top) {
  if (!top.has("grid") && top.has("cells")) {
    Grid g;
    g.factors = {2};
    g.echo_around = top.get_string("echo_around", "");
    return g;
  }
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
  g.adaptive_auto = grid.get_string("adaptive_factor", "adaptive", {"adaptive", "auto"}) == "auto";
  grid.finish();
  g.echo_around = top.get_string("echo_around", "");
  return g;
}

// $.tuning.reading and .margin: how reaching the target is read (TuningSpec::reading).
void read_reading(SpecObject& t, ExperimentSpec& spec) {
  spec.tuning.reading_given = t.has("reading");
  spec.tuning.reading = t.get_string("reading", "first_touch", {"first_touch", "held"});
  spec.tuning.margin = t.get_number("margin", 0.0, 0.0, 1.0);
  if (t.has("margin") && spec.tuning.reading != "held")
    throw_spec_error("$.tuning.margin", "a margin is for \"reading\": \"held\"");
  if (spec.tuning.reading == "held" &&
      spec.base_config.value("eval_mode", std::string("inline")) != "snapshots")
    throw_spec_error("$.tuning.reading",
                     "\"held\" reads every evaluation of a run, so its runs must go on past "
                     "the target: set \"eval_mode\": \"snapshots\" in the base config");
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
    read_reading(t, spec);
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
    read_reading(t, spec);
    if (const nlohmann::json* g = t.raw("groups")) {
      if (!g->is_object())
        throw_spec_error("$.tuning.groups", "expected an object: {\"group\": [cell ids]}");
      for (const auto& [name, ids] : g->items()) {
        const std::string path = "$.tuning.groups." + name;
        if (!ids.is_array() || ids.size() < 2)
          throw_spec_error(path, "expected a list of at least 2 cell ids");
        for (const auto& id : ids) {
          if (!id.is_string()) throw_spec_error(path, "expected a list of cell ids");
          spec.tuning.groups[name].push_back(id.get<std::string>());
        }
      }
    }
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
    c.adaptive_auto = g.adaptive_auto;
    c.echo_around = g.echo_around;
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
// "adaptive_factor",
// "tuning_lr", "lr" (the cell's own rate: not tuned)}.
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
      c.adaptive_auto = co.get_string("adaptive_factor", g.adaptive_auto ? "auto" : "adaptive",
                                      {"adaptive", "auto"}) == "auto";
      c.echo_around = g.echo_around;
      std::vector<int64_t> s = int_list(co, "seeds", g.seeds, 0);
      if (s.empty())
        throw_spec_error(
            co.field_path("seeds"),
            "missing; expected a list of seeds (there is no $.grid to take them from)");
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
      if (co.raw("lr")) {
        if (co.raw("tuning_lr"))
          throw_spec_error(co.field_path("lr"),
                           "a cell has its own rate or tuning rates, not both");
        c.lr = co.get_number("lr", std::nullopt, 1e-12);
        c.fixed_lr = true;
      }
      co.finish();
      spec.cells.push_back(std::move(c));
    }
  }
}

// No final seed is a tuning seed; no two cells share an id; a tuning group names cells
// that exist, each in one group at most, none with its own rate.
void check_cells(const ExperimentSpec& spec) {
  std::map<std::string, std::string> group_of;
  for (const auto& [name, ids] : spec.tuning.groups) {
    for (const std::string& id : ids) {
      auto c = std::find_if(spec.cells.begin(), spec.cells.end(),
                            [&](const ExperimentCell& x) { return x.id == id; });
      if (c == spec.cells.end())
        experiment_error("tuning group " + name + ": no cell '" + id + "'");
      if (c->fixed_lr)
        experiment_error("tuning group " + name + ": cell " + id + " has its own rate");
      if (!group_of.emplace(id, name).second)
        experiment_error("cell " + id + " is in tuning groups " + group_of[id] + " and " + name);
    }
  }
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

namespace detail {
void experiment_error(const std::string& message, const std::string& input) {
  throw Error(ErrorCode::kInvalidArgument, kStage, message, input);
}
}  // namespace detail

}  // namespace dataecho::train
