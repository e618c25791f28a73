// Per-cell learning-rate tuning (docs/protocol.md): which rates a cell has tried, which
// runs are still missing, and the rate it chose, read from the result files alone, so
// that an interrupted sweep resumes exactly where it stopped.
#include <algorithm>
#include <filesystem>

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

}  // namespace detail

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
          {"note", note}};
}

TuningState tuning_state(const ExperimentSpec& spec, const ExperimentCell& cell) {
  TuningState st;
  if (spec.tuning.from) {
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
  if (!spec.tuning.enabled()) return st;
  std::vector<double> lrs = cell.tuning_lrs.empty() ? spec.tuning.lrs : cell.tuning_lrs;
  BootstrapOptions few;  // the tuning's medians: the interval is only informative
  few.resamples = 2000;
  for (int64_t widened = 0;; ++widened) {
    st.trials.clear();
    st.pending.clear();
    for (double lr : lrs) {
      LrTrial t;
      t.lr = lr;
      const ExperimentCell tc = detail::tuning_cell(cell, lr);
      std::vector<Observation> obs;
      for (uint64_t seed : spec.tuning.seeds) {
        nlohmann::json s = detail::finished_summary(spec, tc, seed);
        if (!s.is_object()) continue;
        ++t.runs;
        obs.push_back(detail::fresh_observation(s));
        t.reached += obs.back().censored ? 0 : 1;
      }
      t.fresh = estimate_median(obs, few);
      if (t.runs < static_cast<int64_t>(spec.tuning.seeds.size())) st.pending.push_back(lr);
      st.trials.push_back(std::move(t));
    }
    if (!st.pending.empty()) return st;
    // The winner: the smallest median fresh examples to target (a censored run counts at
    // its budget); ties go to the rate with more runs at the target, then the smaller.
    size_t best = 0;
    for (size_t i = 1; i < st.trials.size(); ++i) {
      const LrTrial& a = st.trials[i];
      const LrTrial& b = st.trials[best];
      if (a.fresh->median < b.fresh->median ||
          (a.fresh->median == b.fresh->median && a.reached > b.reached))
        best = i;
    }
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

}  // namespace dataecho::train
