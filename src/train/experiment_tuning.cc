// Per-cell learning-rate tuning (docs/protocol.md): which rates a cell has tried, which
// runs are still missing, and the rate it chose, read from the result files alone, so
// that an interrupted sweep resumes exactly where it stopped.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "dataecho/train/experiment.h"
#include "experiment_internal.h"

namespace dataecho::train {
namespace fs = std::filesystem;

namespace detail {

ExperimentCell tuning_cell(const ExperimentCell& cell, double lr) {
  ExperimentCell c = cell;
  c.lr = lr;
  c.tuning_run = true;
  return c;
}

nlohmann::json finished_summary(const ExperimentSpec& spec, const ExperimentCell& cell,
                                uint64_t seed) {
  nlohmann::json done =
      read_json_file((fs::path(run_dir(spec, cell, seed)) / "result.json").string());
  if (!done.is_object()) return nullptr;
  try {
    nlohmann::json identity;
    cell_config(spec, cell, seed, ExperimentOptions{}, &identity);
    if (done.value("config", nlohmann::json()) != identity) return nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
  return done.value("summary", nlohmann::json());
}

Observation fresh_observation(const nlohmann::json& summary) {
  const bool hit = summary.value("reached_target", false);
  const char* key = hit ? "fresh_to_target" : "fresh";
  const double v =
      summary.contains(key) && summary[key].is_number() ? summary[key].get<double>() : 0;
  return {v, !hit};
}

std::vector<nlohmann::json> read_eval_objects(const std::string& dir, std::string* error) {
  std::vector<nlohmann::json> rows;
  const fs::path path = fs::path(dir) / "evals.jsonl";
  std::ifstream in(path);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    try {
      auto j = nlohmann::json::parse(line);
      // An evaluation has at least its fresh examples and its accuracy.
      static_cast<void>(j.at("fresh").get<double>() + j.at("accuracy").get<double>());
      rows.push_back(std::move(j));
    } catch (const std::exception& e) {
      if (error && error->empty())
        *error = path.string() + ", line " + std::to_string(n) + ": not an evaluation (" +
                 e.what() + ")";
    }
  }
  return rows;
}

std::vector<std::vector<double>> read_evals(const std::string& dir, std::string* error) {
  std::vector<std::vector<double>> rows;
  for (const auto& j : read_eval_objects(dir, error)) {
    const double loss = j.contains("loss") && j["loss"].is_number()
                            ? j["loss"].get<double>()
                            : std::numeric_limits<double>::quiet_NaN();
    rows.push_back({j["fresh"].get<double>(), j["accuracy"].get<double>(), loss});
  }
  return rows;
}

TargetReading target_reading(const ExperimentSpec& spec) {
  const TuningSpec& t =
      spec.tuning.from && !spec.tuning.reading_given ? spec.tuning.from->tuning : spec.tuning;
  return {t.reading == "held", t.margin};
}

std::optional<HeldTarget> held_target(const ExperimentSpec& spec, const ExperimentCell& cell) {
  const TargetReading reading = target_reading(spec);
  if (!reading.held) return std::nullopt;
  const uint64_t seed = cell.seeds.empty() ? 1 : cell.seeds.front();  // any: same target
  const TrainConfig c = cell_config(spec, cell, seed, ExperimentOptions{}, nullptr);
  if (c.target_accuracy) return HeldTarget{*c.target_accuracy, false, reading.margin};
  return HeldTarget{c.target_loss.value_or(0), true, reading.margin};
}

nlohmann::json summary_as_read(const std::string& dir, const nlohmann::json& summary,
                               const std::optional<HeldTarget>& held) {
  if (!held) return summary;
  std::string error;
  const std::vector<nlohmann::json> evals = read_eval_objects(dir, &error);
  if (!error.empty() || evals.empty())
    experiment_error("the \"held\" reading reads every evaluation of a run: " +
                     (error.empty() ? "no evaluations in " + dir + "/evals.jsonl" : error));
  std::vector<double> metric;
  for (const auto& e : evals) {
    const nlohmann::json& v = e[held->loss ? "loss" : "accuracy"];
    metric.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
  }
  const std::optional<size_t> i = held->loss ? held_index_of_loss(metric, held->value, held->margin)
                                             : held_index(metric, held->value, held->margin);
  nlohmann::json s = summary;
  s["reached_target"] = i.has_value();
  // The to-target figures are those of the evaluation from which the run holds it.
  static constexpr std::pair<const char*, const char*> kAt[] = {
      {"fresh_to_target", "fresh"},
      {"steps_to_target", "step"},
      {"seconds_to_target", "train_seconds"},
      {"wall_seconds_to_target", "wall_seconds"},
      {"raw_reads_to_target", "raw_reads"}};
  for (const auto& [to_target, at] : kAt) {
    s.erase(to_target);
    if (i && evals[*i].contains(at)) s[to_target] = evals[*i][at];
  }
  return s;
}

}  // namespace detail

std::optional<size_t> held_index(const std::vector<double>& accuracy, double target,
                                 double margin) {
  // Accuracies are counts over the evaluation set: compare with a tolerance far below one
  // image in a million, so that 0.9 read back from JSON meets a target of 0.9.
  constexpr double kTol = 1e-9;
  std::optional<size_t> found;
  // Backwards: an evaluation qualifies when it meets the target and no later one falls
  // below the floor; the earliest qualifying one is the answer.
  for (size_t i = accuracy.size(); i-- > 0;) {
    if (accuracy[i] < target - margin - kTol) break;
    if (accuracy[i] >= target - kTol) found = i;
  }
  return found;
}

std::optional<size_t> held_index_of_loss(const std::vector<double>& loss, double target,
                                         double margin) {
  // A loss held below target: an accuracy-like series (higher is better) held above.
  std::vector<double> negated;
  negated.reserve(loss.size());
  for (double v : loss) negated.push_back(std::isnan(v) ? -HUGE_VAL : -v);
  return held_index(negated, -target, margin);
}

namespace {

// Whether trial a beats trial b: fewer median fresh examples to target (a censored run
// counted at its budget), then more runs at the target. The rates of a cell and the
// members of a tuning group are ranked by it.
bool fewer_fresh(const LrTrial& a, const LrTrial& b) {
  return a.fresh->median < b.fresh->median ||
         (a.fresh->median == b.fresh->median && a.reached > b.reached);
}

}  // namespace

nlohmann::json LrTrial::to_json() const {
  return {{"lr", lr},
          {"runs", runs},
          {"reached", reached},
          {"fresh_to_target", fresh ? fresh->to_json() : nlohmann::json(nullptr)}};
}

nlohmann::json TuningState::to_json() const {
  nlohmann::json t = nlohmann::json::array();
  for (const auto& x : trials) t.push_back(x.to_json());
  return {{"trials", t},
          {"pending", pending},
          {"chosen_lr", chosen ? nlohmann::json(*chosen) : nlohmann::json(nullptr)},
          {"note", note},
          {"reading", reading}};
}

namespace {

// One rate's tuning runs of a cell, as far as they are on disk.
// `held`: the cell's held target (detail::held_target), nullopt for the first touch.
LrTrial lr_trial(const ExperimentSpec& spec, const ExperimentCell& cell, double lr,
                 const std::optional<detail::HeldTarget>& held) {
  BootstrapOptions few;  // the tuning's medians: the interval is only informative
  few.resamples = 2000;
  LrTrial t;
  t.lr = lr;
  const ExperimentCell tc = detail::tuning_cell(cell, lr);
  std::vector<Observation> obs;
  for (uint64_t seed : spec.tuning.seeds) {
    nlohmann::json s = detail::finished_summary(spec, tc, seed);
    if (!s.is_object()) continue;
    ++t.runs;
    // Fresh examples to target as the tuning reads them, censored at the run's fresh
    // examples when it never reaches the target.
    obs.push_back(detail::fresh_observation(
        detail::summary_as_read(detail::run_dir(spec, tc, seed), s, held)));
    t.reached += obs.back().censored ? 0 : 1;
  }
  t.fresh = estimate_median(obs, few);
  return t;
}

// "tuning": {"from": ...}: the other experiment's tuning of this cell (or of the cell
// `map` names), with nothing pending here.
TuningState tuning_state_from(const ExperimentSpec& spec, const ExperimentCell& cell) {
  TuningState st;
  auto it = spec.tuning.map.find(cell.id);
  const std::string id = it != spec.tuning.map.end() ? it->second : cell.id;
  for (const auto& other : spec.tuning.from->cells) {
    if (other.id != id) continue;
    st = tuning_state(*spec.tuning.from, other);
    st.pending.clear();
    if (!st.chosen)
      st.note = "experiment " + spec.tuning.from->name + " has not chosen a learning rate for " +
                id + " yet" + (st.note.empty() ? "" : " (" + st.note + ")");
    return st;
  }
  st.note = "experiment " + spec.tuning.from->name + " has no cell " + id;
  return st;
}

}  // namespace

TuningState tuning_state(const ExperimentSpec& spec, const ExperimentCell& cell) {
  TuningState st;
  if (cell.fixed_lr) {
    st.chosen = cell.lr;
    st.note = "the cell's own rate (not tuned)";
    return st;
  }
  if (spec.tuning.from) return tuning_state_from(spec, cell);
  if (!spec.tuning.enabled()) return st;
  st.reading = spec.tuning.reading;
  const std::optional<detail::HeldTarget> held = detail::held_target(spec, cell);
  std::vector<double> lrs = cell.tuning_lrs.empty() ? spec.tuning.lrs : cell.tuning_lrs;
  for (int64_t widened = 0;; ++widened) {
    st.trials.clear();
    st.pending.clear();
    for (double lr : lrs) {
      st.trials.push_back(lr_trial(spec, cell, lr, held));
      if (st.trials.back().runs < static_cast<int64_t>(spec.tuning.seeds.size()))
        st.pending.push_back(lr);
    }
    if (!st.pending.empty()) return st;
    // The winner: the smallest median fresh examples to target (a censored run counts at
    // its budget); ties go to the rate with more runs at the target, then the smaller.
    size_t best = 0;
    for (size_t i = 1; i < st.trials.size(); ++i)
      if (fewer_fresh(st.trials[i], st.trials[best])) best = i;
    if (st.trials[best].reached == 0) {
      st.note =
          "no learning rate reached the target within the budget: no final runs (a larger "
          "budget or other rates would be a change to the protocol)";
      return st;
    }
    const bool low = best == 0, high = best + 1 == lrs.size();
    if (!low && !high) {
      st.chosen = lrs[best];
      return st;
    }
    if (widened >= spec.tuning.widen) {
      st.chosen = lrs[best];
      st.note = "the best rate is at the " + std::string(low ? "low" : "high") +
                " edge of the sweep after widening it " + std::to_string(widened) + " times";
      return st;
    }
    // One more rate beyond that edge, with the ratio of the two rates there.
    if (low)
      lrs.insert(lrs.begin(), lrs[0] * (lrs[0] / lrs[1]));
    else
      lrs.push_back(lrs.back() * (lrs.back() / lrs[lrs.size() - 2]));
  }
}

std::string tuning_group_of(const ExperimentSpec& spec, const std::string& cell_id) {
  for (const auto& [name, ids] : spec.tuning.groups)
    if (std::find(ids.begin(), ids.end(), cell_id) != ids.end()) return name;
  return "";
}

namespace detail {

std::optional<std::string> group_winner(const std::vector<std::string>& ids,
                                        const std::vector<const TuningState*>& states) {
  std::optional<std::string> best;
  const LrTrial* best_trial = nullptr;
  for (size_t k = 0; k < ids.size(); ++k) {
    const TuningState* st = states[k];
    if (!st || !st->chosen) return std::nullopt;  // a member still tuning (or untunable)
    auto trial = std::find_if(st->trials.begin(), st->trials.end(),
                              [&](const LrTrial& t) { return t.lr == *st->chosen; });
    if (trial == st->trials.end() || !trial->fresh) return std::nullopt;
    if (!best_trial || fewer_fresh(*trial, *best_trial)) {
      best = ids[k];
      best_trial = &*trial;
    }
  }
  return best;
}

}  // namespace detail

std::optional<std::string> tuning_group_winner(const ExperimentSpec& spec,
                                               const std::string& group) {
  auto it = spec.tuning.groups.find(group);
  if (it == spec.tuning.groups.end()) return std::nullopt;
  std::vector<TuningState> states;
  for (const std::string& id : it->second) {
    auto cell = std::find_if(spec.cells.begin(), spec.cells.end(),
                             [&](const ExperimentCell& c) { return c.id == id; });
    if (cell == spec.cells.end()) return std::nullopt;
    states.push_back(tuning_state(spec, *cell));
  }
  std::vector<const TuningState*> ptrs;
  for (const auto& st : states) ptrs.push_back(&st);
  return detail::group_winner(it->second, ptrs);
}

int64_t final_run_count(const ExperimentSpec& spec) {
  int64_t runs = 0;
  std::map<std::string, int64_t> group_runs;
  for (const auto& c : spec.cells) {
    const auto n = static_cast<int64_t>(c.seeds.size());
    const std::string group = tuning_group_of(spec, c.id);
    if (group.empty())
      runs += n;
    else
      group_runs[group] = std::max(group_runs[group], n);
  }
  for (const auto& [group, n] : group_runs) runs += n;
  return runs;
}

}  // namespace dataecho::train
