#include "dataecho/core/tuner.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "dataecho/core/clock.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/core/error.h"

namespace dataecho {

Knob::Knob(Kind kind, std::string param, int64_t initial, int64_t min, int64_t max,
           std::function<int64_t(int64_t)> buffered, int64_t max_bytes)
    : kind_(kind),
      param_(std::move(param)),
      min_(min),
      max_(std::max(min, max)),
      buffered_(std::move(buffered)),
      max_bytes_(max_bytes),
      value_(std::clamp(initial, min_, max_)) {}

void Knob::set(int64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  value = std::clamp(value, min_, max_);
  value_.store(value, std::memory_order_release);
  for (auto& [id, fn] : listeners_) fn(value);
}

Knob::Handle Knob::listen(std::function<void(int64_t)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  listeners_[id] = std::move(fn);
  // The handle's deleter removes the listener under mu_, so it waits for a call in flight.
  return Handle(this, [this, id](void*) {
    std::lock_guard<std::mutex> l(mu_);
    listeners_.erase(id);
  });
}

namespace {

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d > 0))
    throw_error(ErrorCode::kInvalidArgument, "autotune",
                std::string("$") + name + " must be a positive number, got \"" + v + "\"");
  return d;
}

// A node's rate is judged on at least this many of its elements (or 8 windows).
constexpr int64_t kMinElements = 20;

}  // namespace

TunerOptions TunerOptions::resolved() const {
  TunerOptions r = *this;
  if (r.cpu_budget <= 0) {
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    r.cpu_budget = env_double("DATAECHO_CPU_BUDGET", cores);
  }
  if (r.ram_budget_bytes <= 0) {
    const double phys =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    const double mb = env_double("DATAECHO_RAM_BUDGET_MB", std::max(64.0, phys / 8 / 1048576.0));
    r.ram_budget_bytes = static_cast<int64_t>(mb * 1048576.0);
  }
  return r;
}

// ---------------------------------------------------------------- the rules

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
    if (v >= kn.max() || now_s < knobs_[i].blocked_until) continue;
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

// ---------------------------------------------------------------- the tuner

// A knob, its node's counters, and their values at the last window's end.
struct Tuner::Tuned {
  std::shared_ptr<Knob> knob;
  std::shared_ptr<NodeStats> stats;
  std::atomic<int64_t>* cpu_ns = nullptr;  // the node's workers' CPU time (maps)
  int64_t busy = 0, cpu = 0, next = 0;     // the counters at the last sample
  std::atomic<int64_t>*fresh_rows = nullptr, *echoed_rows = nullptr;  // echo knobs
  int64_t fresh = 0, echoed = 0;
  int64_t added_elements = 0;  // the node's elements when it was added, and when (s)
  double added_s = 0;
  bool in_policy = false;  // added to policy_ (by the thread that runs the windows)

  // The window of `dt_s` seconds that ends now.
  KnobWindow sample(double dt_s) {
    KnobWindow m;
    const int64_t b = stats->busy_ns.load(), c = cpu_ns->load(), n = stats->next_ns.load(),
                  e = stats->elements.load();
    const double threads =
        knob->kind() == Knob::Kind::kParallelism ? static_cast<double>(knob->value()) : 1.0;
    m.busy_share = static_cast<double>(b - busy) / 1e9 / dt_s / threads;
    m.cpu_per_thread = static_cast<double>(c - cpu) / 1e9 / dt_s / threads;
    m.wait_share = static_cast<double>(n - next) / 1e9 / dt_s;
    m.elements = e;
    busy = b, cpu = c, next = n;
    if (fresh_rows) {
      const int64_t f = fresh_rows->load(), r = echoed_rows->load();
      const int64_t rows = (f - fresh) + (r - echoed);
      m.repeat_share = rows > 0 ? static_cast<double>(r - echoed) / static_cast<double>(rows) : 0;
      fresh = f, echoed = r;
    }
    const int64_t ne = stats->elements.load();
    m.bytes_per_element =
        ne > 0 ? static_cast<double>(stats->bytes.load()) / static_cast<double>(ne) : 0;
    return m;
  }
};

Tuner::Tuner(TunerOptions options, std::shared_ptr<NodeStats> output)
    : clock_(options.clock ? options.clock : Clock::real()),
      own_thread_(!options.clock),
      output_(std::move(output)),
      policy_(options.resolved(),
              static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

Tuner::~Tuner() { stop(); }

void Tuner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Tuner::add(const std::shared_ptr<Knob>& knob, const std::shared_ptr<NodeStats>& stats) {
  if (!knob || !stats) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  for (const auto& k : knobs_)
    if (k->knob == knob) return;
  auto t = std::make_unique<Tuned>();
  t->knob = knob;
  t->stats = stats;
  t->cpu_ns = &stats->counter("cpu_ns");
  t->busy = stats->busy_ns.load();
  t->cpu = t->cpu_ns->load();
  t->next = stats->next_ns.load();
  t->added_elements = stats->elements.load();
  if (knob->kind() == Knob::Kind::kEcho) {
    t->fresh_rows = &stats->counter("fresh");
    t->echoed_rows = &stats->counter("echoed");
    t->fresh = t->fresh_rows->load();
    t->echoed = t->echoed_rows->load();
  }
  const bool first = !started_;
  if (first) {
    started_ = true;
    start_ns_ = clock_->now_ns();
    if (!own_thread_) begin();
  }
  t->added_s = static_cast<double>(clock_->now_ns() - start_ns_) / 1e9;
  stats->set_value(knob->param(), static_cast<double>(knob->value()));
  knobs_.push_back(std::move(t));
  if (first && own_thread_) thread_ = start_engine_thread([this] { run(); });
}

void Tuner::begin() {
  out_next_ns_ = output_ ? output_->next_ns.load() : 0;
  cpu_ns_ = clock_->process_cpu_ns();
  last_ns_ = start_ns_;
}

void Tuner::run() {
  std::unique_lock<std::mutex> lock(mu_);
  begin();
  while (true) {
    const double length =
        policy_.window_at(static_cast<double>(clock_->now_ns() - start_ns_) / 1e9);
    cv_.wait_for(lock, std::chrono::duration<double>(length), [this] { return stop_; });
    if (stop_) return;
    window(lock, clock_->now_ns());
  }
}

std::optional<TunerChange> Tuner::step() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t t = clock_->now_ns();
  if (own_thread_ || !started_ || stop_ || t <= last_ns_) return std::nullopt;
  return window(lock, t);
}

std::optional<TunerChange> Tuner::window(std::unique_lock<std::mutex>& lock, int64_t t) {
  const double dt = static_cast<double>(t - last_ns_) / 1e9;
  last_ns_ = t;
  ++windows_;
  std::vector<Tuned*> knobs;
  for (auto& k : knobs_) {
    knobs.push_back(k.get());
    // Knobs added since the last window join the policy here, on this thread.
    if (!k->in_policy) {
      policy_.add(k->knob, k->added_elements, k->added_s);
      k->in_policy = true;
    }
  }
  lock.unlock();  // knobs' listeners take their nodes' locks: never under mu_

  TunerWindow w;
  w.t_s = static_cast<double>(t - start_ns_) / 1e9;
  const int64_t out_w = output_ ? output_->next_ns.load() : 0;
  const int64_t cpu = clock_->process_cpu_ns();
  w.consumer_wait = static_cast<double>(out_w - out_next_ns_) / 1e9 / dt;
  w.cores = static_cast<double>(cpu - cpu_ns_) / 1e9 / dt;
  out_next_ns_ = out_w, cpu_ns_ = cpu;
  for (Tuned* k : knobs) w.knobs.push_back(k->sample(dt));
  const TunerPolicy::Outcome o = policy_.step(w);
  if (o.kept) knobs[*o.kept]->stats->counter("tuner_kept").fetch_add(1, std::memory_order_relaxed);
  if (o.change) {
    const TunerChange& c = *o.change;
    Tuned& k = *knobs[c.knob];
    k.stats->set_value(k.knob->param(), static_cast<double>(c.to));
    k.stats->counter("tuner_changes").fetch_add(1, std::memory_order_relaxed);
  }

  lock.lock();
  if (o.change) {
    const TunerChange& c = *o.change;
    changes_.push_back({{"t_s", std::round(w.t_s * 10) / 10},
                        {"node", knobs[c.knob]->stats->name},
                        {"param", knobs[c.knob]->knob->param()},
                        {"from", c.from},
                        {"to", c.to},
                        {"reason", c.reason}});
  }
  return o.change;
}

nlohmann::json Tuner::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json j;
  j["cpu_budget"] = policy_.options().cpu_budget;
  j["ram_budget_mb"] = static_cast<double>(policy_.options().ram_budget_bytes) / 1048576.0;
  j["windows"] = windows_;
  j["knobs"] = nlohmann::json::array();
  for (const auto& k : knobs_) {
    j["knobs"].push_back({{"node", k->stats->name},
                          {"param", k->knob->param()},
                          {"value", k->knob->value()},
                          {"min", k->knob->min()},
                          {"max", k->knob->max()}});
  }
  j["changes"] = changes_;
  return j;
}

}  // namespace dataecho
