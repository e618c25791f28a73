// The tuner's rules (TunerPolicy, core/tuner.h): a window's measurements in, at most one
// knob's change out. Apart from the Tuner (src/core/tuner.cc), which measures the windows
// on its thread.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "dataecho/core/error.h"
#include "dataecho/core/tuner.h"

namespace dataecho {

namespace {
// A node's rate is judged on at least this many of its elements (or 8 windows).
constexpr int64_t kMinElements = 20;
}  // namespace

TunerPolicy::TunerPolicy(const TunerOptions& options, int hardware_cores)
    : o_(options), hardware_cores_(std::max(1, hardware_cores)) {}

size_t TunerPolicy::add(std::shared_ptr<Knob> knob, int64_t elements, double t_s) {
  State s;
  s.knob = std::move(knob);
  s.elements_at_change = elements;
  s.change_s = t_s;
  knobs_.push_back(std::move(s));
  return knobs_.size() - 1;
}

double TunerPolicy::rate_since_change(const TunerWindow& w, size_t i) const {
  const double change_s = knobs_[i].change_s;
  return w.t_s > change_s ? static_cast<double>(since_change(w, i)) / (w.t_s - change_s) : 0;
}

std::string TunerPolicy::budget_label(double cores) const {
  char s[96];
  std::snprintf(s, sizeof s, "%.2f cores used, budget %.2f", cores, o_.cpu_budget);
  return s;
}

double TunerPolicy::ram_projection(const TunerWindow& w, std::optional<size_t> changed,
                                   int64_t value) const {
  double bytes = 0;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const Knob& k = *knobs_[i].knob;
    const int64_t v = changed == i ? value : k.value();
    double b = static_cast<double>(k.buffered_elements(v)) * w.knobs[i].bytes_per_element;
    if (k.max_buffered_bytes() > 0) b = std::min(b, static_cast<double>(k.max_buffered_bytes()));
    bytes += b;
  }
  return bytes;
}

bool TunerPolicy::may_change(double t_s) const {
  const double window = window_at(t_s);
  const double interval = interval_at(t_s);
  // Strict after the warm-up (a change waits for the first window that ends a full
  // interval after the last); during it, the next window (woken a little early or late).
  return t_s - last_change_s_ >= (warm_up(t_s) ? interval - 0.5 * window : interval);
}

std::optional<TunerChange> TunerPolicy::over_budget(const TunerWindow& w) const {
  // The CPU budget binds only below the machine's cores: a process cannot use more than
  // all of them.
  if (cpu_limited() && w.cores > o_.cpu_budget * 1.1 + 0.05) {
    std::optional<size_t> lower = trial_;
    if (!lower) {
      double most = 0;
      for (size_t i = 0; i < knobs_.size(); ++i) {
        const Knob& k = *knobs_[i].knob;
        const double cost = w.knobs[i].cpu_per_thread * static_cast<double>(k.value());
        if (k.kind() == Knob::Kind::kParallelism && k.value() > k.min() && cost > most)
          most = cost, lower = i;
      }
    }
    if (lower) {
      const int64_t v = knobs_[*lower].knob->value();
      return TunerChange{*lower, v, lower == trial_ ? trial_from_ : v - 1,
                         TunerChange::Rule::kCpuBudget,
                         "over the CPU budget: " + budget_label(w.cores)};
    }
  }
  if (ram_projection(w, std::nullopt, 0) > static_cast<double>(o_.ram_budget_bytes)) {
    std::optional<size_t> lower = trial_;
    for (size_t i = 0; i < knobs_.size(); ++i) {
      const Knob& k = *knobs_[i].knob;
      if (!lower && k.kind() == Knob::Kind::kBuffer && k.value() > k.min()) lower = i;
    }
    if (lower) {
      const int64_t v = knobs_[*lower].knob->value();
      return TunerChange{*lower, v, lower == trial_ ? trial_from_ : v / 2,
                         TunerChange::Rule::kRamBudget, "over the RAM budget"};
    }
  }
  return std::nullopt;
}

TunerPolicy::Verdict TunerPolicy::judge_trial(const TunerWindow& w, TunerChange* take_back) const {
  if (!trial_) return Verdict::kNone;
  const size_t k = *trial_;
  // Judged on the windows since the raise, on at least kMinElements of the node's
  // elements (or 8 intervals).
  if (since_change(w, k) < kMinElements && w.t_s - last_change_s_ < 8 * interval_at(w.t_s))
    return Verdict::kWait;  // too few elements yet to tell a 5% gain
  const double after = rate_since_change(w, k);
  if (after >= rate_before_ * (1 + o_.min_gain)) return Verdict::kKeep;
  char why[160];
  std::snprintf(why, sizeof why, "%.0f -> %.0f elements/s", rate_before_, after);
  if (take_back)
    *take_back = TunerChange{k, knobs_[k].knob->value(), trial_from_, TunerChange::Rule::kTakeBack,
                             std::string("taken back: ") + why};
  return Verdict::kTakeBack;
}

double TunerPolicy::short_share(const TunerWindow& w) const {
  double s = w.consumer_wait;
  for (size_t i = 0; i < knobs_.size(); ++i)
    if (knobs_[i].knob->kind() == Knob::Kind::kEcho) s = std::max(s, w.knobs[i].repeat_share);
  return s;
}

bool TunerPolicy::keeps_up(const TunerWindow& w) const { return short_share(w) < 0.05; }

std::optional<TunerChange> TunerPolicy::raise_pass(const TunerWindow& w, int pass) const {
  const double now_s = w.t_s;
  const bool warm = warm_up(now_s);
  const double interval = interval_at(now_s);
  // A knob that may still rise but has not yet run 20 elements since it was added or
  // last changed: an echo waits for it to be judged.
  bool untested = false;
  if (pass == 2) {
    for (size_t i = 0; i < knobs_.size(); ++i) {
      const Knob& kn = *knobs_[i].knob;
      untested =
          untested || (kn.kind() != Knob::Kind::kEcho && kn.value() < kn.max() &&
                       now_s >= knobs_[i].blocked_until && since_change(w, i) < kMinElements &&
                       now_s - knobs_[i].change_s < 8 * interval);
    }
  }
  std::optional<size_t> best;
  int64_t best_to = 0;
  double best_score = 0;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const Knob& kn = *knobs_[i].knob;
    const KnobWindow& m = w.knobs[i];
    const int64_t v = kn.value();
    if (v >= kn.max() || now_s < knobs_[i].blocked_until || knobs_[i].held) continue;
    // Its rate so far must be measured on enough elements to judge the raise against.
    if (since_change(w, i) < kMinElements && now_s - last_change_s_ < 8 * interval) continue;
    int64_t to = 0;
    double score = 0;
    if (pass == 0 && kn.kind() == Knob::Kind::kParallelism) {
      if (m.busy_share < 0.5) continue;  // its workers wait for input or for room
      score = m.busy_share;
      to = warm && m.busy_share >= 0.9 ? 2 * v : v + 1;
      to = std::min({to, kn.max(), o_.max_parallelism});
      // Threads that would need more CPU than the budget, or than the machine has, are
      // not added. (Against the machine, with half a core of slack: the consumer and the
      // other stages use some, and a stage that waits part of the time may still gain
      // from one thread more.)
      const double limit = cpu_limited() ? o_.cpu_budget + 0.05 : hardware_cores_ + 0.5;
      while (to > v && w.cores + m.cpu_per_thread * static_cast<double>(to - v) > limit) --to;
    } else if (pass == 1 && kn.kind() == Knob::Kind::kBuffer) {
      if (m.wait_share < 0.05) continue;
      score = m.wait_share;
      to = std::min(2 * v, kn.max());
    } else if (pass == 2 && kn.kind() == Knob::Kind::kEcho) {
      // Only for a consumer that waits (not for repeats already made), and only once the
      // other settings have had their chance.
      if (w.consumer_wait < 0.05 || untested) continue;
      score = w.consumer_wait;
      to = kn.max();
    } else {
      continue;
    }
    if (to <= v) continue;
    if (ram_projection(w, i, to) > static_cast<double>(o_.ram_budget_bytes)) continue;
    if (score > best_score) best = i, best_to = to, best_score = score;
  }
  if (!best) return std::nullopt;
  const double consumer_wait = w.consumer_wait;
  const double shortfall = short_share(w);
  char why[200];
  TunerChange c{*best, knobs_[*best].knob->value(), best_to, TunerChange::Rule::kRaise, ""};
  if (pass == 2) {
    c.rule = TunerChange::Rule::kRaiseEcho;
    std::snprintf(why, sizeof why,
                  "consumer waits %.0f%% of the time and no other setting can rise: echo fills "
                  "the gap; %s",
                  consumer_wait * 100, budget_label(w.cores).c_str());
  } else if (shortfall > consumer_wait) {
    std::snprintf(why, sizeof why,
                  "an echo repeats %.0f%% of the rows (consumer waits %.0f%%); node busy %.0f%%, "
                  "%s",
                  shortfall * 100, consumer_wait * 100, w.knobs[*best].busy_share * 100,
                  budget_label(w.cores).c_str());
  } else {
    std::snprintf(why, sizeof why, "consumer waits %.0f%% of the time; node busy %.0f%%, %s",
                  consumer_wait * 100, w.knobs[*best].busy_share * 100,
                  budget_label(w.cores).c_str());
  }
  c.reason = why;
  return c;
}

std::optional<TunerChange> TunerPolicy::raise_bottleneck(const TunerWindow& w) const {
  // The busiest map first, then the buffer waited on most.
  if (auto c = raise_pass(w, 0)) return c;
  return raise_pass(w, 1);
}

std::optional<TunerChange> TunerPolicy::raise_echo(const TunerWindow& w) const {
  return raise_pass(w, 2);
}

void TunerPolicy::apply(const TunerWindow& w, TunerChange& c) {
  State& k = knobs_[c.knob];
  c.from = k.knob->value();
  k.knob->set(c.to);
  c.to = k.knob->value();
  last_change_s_ = w.t_s;
  for (size_t i = 0; i < knobs_.size(); ++i)
    knobs_[i].elements_at_change = w.knobs[i].elements, knobs_[i].change_s = w.t_s;
}

TunerPolicy::Outcome TunerPolicy::step(const TunerWindow& w) {
  if (w.knobs.size() != knobs_.size())
    throw_error(ErrorCode::kInvalidArgument, "autotune",
                "a window measures " + std::to_string(w.knobs.size()) + " knobs, the tuner has " +
                    std::to_string(knobs_.size()));
  Outcome out;
  if (!may_change(w.t_s)) return out;
  // 1. Over a budget.
  if (auto c = over_budget(w)) {
    trial_.reset();
    apply(w, *c);
    out.change = std::move(c);
    return out;
  }
  // 2. The last raise, judged.
  TunerChange back;
  switch (judge_trial(w, &back)) {
    case Verdict::kNone:
      break;
    case Verdict::kWait:
      return out;
    case Verdict::kKeep:
      out.kept = *trial_;
      trial_.reset();
      break;
    case Verdict::kTakeBack:
      knobs_[back.knob].blocked_until = w.t_s + 4 * o_.change_interval_seconds;
      trial_.reset();
      apply(w, back);
      out.change = std::move(back);
      return out;
  }
  // 3. Keeping up: nothing to raise.
  if (keeps_up(w)) return out;
  // 4, then 5.
  std::optional<TunerChange> c = raise_bottleneck(w);
  if (!c) c = raise_echo(w);
  if (!c) return out;
  rate_before_ = rate_since_change(w, c->knob);
  trial_from_ = knobs_[c->knob].knob->value();
  apply(w, *c);
  trial_ = c->knob;
  out.change = std::move(c);
  return out;
}

TunerMemo::Knob TunerPolicy::remember(size_t i) const {
  const State& s = knobs_.at(i);
  TunerMemo::Knob k;
  k.value = s.knob->value();
  k.blocked_until_s = s.blocked_until;
  if (trial_ == i) {
    k.trial = true;
    k.trial_from = trial_from_;
    k.rate_before = rate_before_;
  }
  return k;
}

void TunerPolicy::resume(size_t i, const TunerMemo::Knob& k) {
  knobs_.at(i).blocked_until = k.blocked_until_s;
  if (k.trial) {
    // Judged on this node's rate from when it joined (its elements_at_change and
    // change_s), against the rate before the raise in the tuner that made it.
    trial_ = i;
    trial_from_ = k.trial_from;
    rate_before_ = k.rate_before;
  } else if (trial_ == i) {
    trial_.reset();
  }
}

std::optional<double> TunerPolicy::last_change() const {
  if (last_change_s_ < -1e299) return std::nullopt;
  return last_change_s_;
}

void TunerPolicy::resume_last_change(std::optional<double> t_s) {
  last_change_s_ = t_s.value_or(-1e300);
}

}  // namespace dataecho
