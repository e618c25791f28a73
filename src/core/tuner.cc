#include "dataecho/core/tuner.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "dataecho/core/autoscale.h"
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
  // Remembering (under the tuner's mu_): the policy's state of this knob as of the last
  // window, or the memo knob it is to resume from (then `resume_policy`: the policy takes
  // it at the next window).
  TunerMemo::Knob learned;
  bool resume_policy = false;

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
      memory_key_(options.memory_key),
      remember_(options.remember),
      memory_(options.memory_key.empty() || !options.remember ? nullptr
              : options.memory                                ? options.memory
                                                              : TunerMemory::global()),
      policy_(options.resolved(),
              static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  if (!memory_) return;
  resumed_ = memory_->find(memory_key_);
  if (!resumed_) return;
  // No thread yet: the policy is this thread's.
  resumed_from_ = "memory";
  windows_before_ = resumed_->windows;
  last_change_s_ = resumed_->last_change_s;
  policy_.resume_last_change(resumed_->last_change_s);
}

Tuner::~Tuner() { stop(); }

void Tuner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!stored_) {
    stored_ = true;
    store_locked(clock_->now_ns());
  }
}

std::unique_ptr<Tuner::Tuned> Tuner::make_tuned(const std::shared_ptr<Knob>& knob,
                                                const std::shared_ptr<NodeStats>& stats) const {
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
  return t;
}

void Tuner::add(const std::shared_ptr<Knob>& knob, const std::shared_ptr<NodeStats>& stats) {
  if (!knob || !stats) return;
  std::optional<TunerMemo::Knob> remembered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    for (const auto& k : knobs_)
      if (k->knob == knob) return;
    if (resumed_) {
      if (const TunerMemo::Knob* k = resumed_->find(stats->name, knob->param())) remembered = *k;
    }
  }
  // The remembered value, before the node reads it; outside mu_ (a knob's listeners take
  // their node's locks).
  if (remembered) knob->set(remembered->value);
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  for (const auto& k : knobs_)
    if (k->knob == knob) return;
  auto t = make_tuned(knob, stats);
  if (remembered) {
    t->learned = *remembered;
    t->resume_policy = true;
  }
  start_locked();
  t->added_s = static_cast<double>(clock_->now_ns() - start_ns_) / 1e9;
  stats->set_value(knob->param(), static_cast<double>(knob->value()));
  knobs_.push_back(std::move(t));
}

void Tuner::start_locked() {
  if (started_) return;
  started_ = true;
  // A resumed tuner goes on from the memo's time: its warm-up is not started again.
  const double elapsed_s = resumed_ ? resumed_->elapsed_s : 0;
  start_ns_ = clock_->now_ns() - static_cast<int64_t>(elapsed_s * 1e9);
  if (!own_thread_)
    begin();
  else  // run() takes mu_, held here: it begins once the caller is done
    thread_ = start_engine_thread([this] { run(); });
}

void Tuner::add_scaler(const std::shared_ptr<ScalePolicy>& scaler,
                       const std::shared_ptr<NodeStats>& source) {
  if (!scaler || !source) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || scaler_) return;
  scaler_source_ = source;
  scaler_ = scaler;
  start_locked();
}

void Tuner::begin() {
  last_ns_ = clock_->now_ns();
  out_next_ns_ = output_ ? output_->next_ns_at(last_ns_) : 0;
  cpu_ns_ = clock_->process_cpu_ns();
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

void Tuner::join_policy() {
  if (pending_last_change_) {
    policy_.resume_last_change(*pending_last_change_);
    pending_last_change_.reset();
  }
  for (size_t i = 0; i < knobs_.size(); ++i) {
    Tuned& k = *knobs_[i];
    if (!k.in_policy) {
      policy_.add(k.knob, k.added_elements, k.added_s);
      k.in_policy = true;
    }
    if (scaler_ && scaler_->sets_echo() && k.knob->kind() == Knob::Kind::kEcho) policy_.hold(i);
    if (k.resume_policy) {
      policy_.resume(i, k.learned);
      k.resume_policy = false;
    }
  }
}

std::optional<TunerChange> Tuner::window(std::unique_lock<std::mutex>& lock, int64_t t) {
  const double dt = static_cast<double>(t - last_ns_) / 1e9;
  last_ns_ = t;
  ++windows_;
  // Knobs added since the last window join the policy here, on this thread.
  join_policy();
  std::vector<Tuned*> knobs;
  for (auto& k : knobs_) knobs.push_back(k.get());
  const double t_s = static_cast<double>(t - start_ns_) / 1e9;
  const std::shared_ptr<ScalePolicy> scaler = scaler_;
  const std::shared_ptr<NodeStats> source = scaler_source_;
  lock.unlock();  // knobs' listeners take their nodes' locks: never under mu_

  TunerWindow w;
  w.t_s = t_s;
  // A wait in progress counts in this window up to its end (a sampled node's time is
  // extrapolated, and may still pass the window: the share is at most 1).
  const int64_t out_w = output_ ? output_->next_ns_at(t) : 0;
  const int64_t cpu = clock_->process_cpu_ns();
  w.consumer_wait = std::clamp(static_cast<double>(out_w - out_next_ns_) / 1e9 / dt, 0.0, 1.0);
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
  std::optional<ScaleStep> scaled;
  if (scaler) scaled = scale_window(*scaler, *source, w, knobs, dt);

  lock.lock();
  if (scaled) record_scale(*scaled, w.t_s, knobs);
  // What the policy knows now, for the memo (a knob resumed from a restored state
  // meanwhile keeps that state until the next window).
  for (size_t i = 0; i < knobs.size(); ++i)
    if (!knobs[i]->resume_policy) knobs[i]->learned = policy_.remember(i);
  if (!pending_last_change_) last_change_s_ = policy_.last_change();
  if (o.change) {
    const TunerChange& c = *o.change;
    changes_.push_back({{"t_s", std::round(w.t_s * 10) / 10},
                        {"node", knobs[c.knob]->stats->name},
                        {"param", knobs[c.knob]->knob->param()},
                        {"from", c.from},
                        {"to", c.to},
                        {"reason", c.reason}});
  }
  store_locked(t);
  return o.change;
}

Tuner::Tuned* Tuner::echo_of(const std::vector<Tuned*>& knobs) {
  for (Tuned* k : knobs)
    if (k->knob->kind() == Knob::Kind::kEcho) return k;
  return nullptr;
}

ScaleStep Tuner::scale_window(ScalePolicy& scaler, NodeStats& source, const TunerWindow& w,
                              const std::vector<Tuned*>& knobs, double dt) {
  ScaleWindow sw;
  sw.t_s = w.t_s;
  sw.dt_s = dt;
  sw.consumer_wait = w.consumer_wait;
  sw.source_elements = source.elements.load();
  // D is the trainer's pace when it never waits: the demand node's elements over the
  // time the pipeline's consumer spent outside its next(). (The demand node's own
  // consumer's time would be a prefetch thread's or a shuffle's: while the trainer waits
  // for input, that is the stages' work after the node alone, and D comes out several
  // times too large.)
  sw.demand_wait_s = w.consumer_wait * dt;
  Tuned* echo = echo_of(knobs);
  if (echo) {
    const size_t i =
        static_cast<size_t>(std::find(knobs.begin(), knobs.end(), echo) - knobs.begin());
    sw.demand_elements = w.knobs[i].elements;
    sw.echo_cap = echo->knob->value();
    sw.echo_max = echo->knob->max();
  } else {
    sw.demand_elements = sw.source_elements;
  }
  const ScaleStep s = scaler.step(sw);
  if (echo && s.cap_to != s.cap_from) {
    echo->knob->set(s.cap_to);
    echo->stats->set_value(echo->knob->param(), static_cast<double>(echo->knob->value()));
    echo->stats->counter("tuner_changes").fetch_add(1, std::memory_order_relaxed);
  }
  for (const auto& [key, value] : scaler.stats_values()) {
    source.set_value(key, value);
    if (echo && scaler.sets_echo() && key == "scale_factor") echo->stats->set_value(key, value);
  }
  return s;
}

void Tuner::record_scale(const ScaleStep& s, double t_s, const std::vector<Tuned*>& knobs) {
  const auto change = [&](const std::string& node, const char* param, int64_t from, int64_t to) {
    changes_.push_back({{"t_s", std::round(t_s * 10) / 10},
                        {"node", node},
                        {"param", param},
                        {"from", from},
                        {"to", to},
                        {"reason", s.line}});
  };
  if (s.workers_to != s.workers_from)
    change(scaler_source_->name, "workers", s.workers_from, s.workers_to);
  if (Tuned* echo = echo_of(knobs); echo && s.cap_to != s.cap_from)
    change(echo->stats->name, echo->knob->param().c_str(), s.cap_from, s.cap_to);
}

TunerMemo Tuner::memo_locked(int64_t now_ns) const {
  TunerMemo m;
  m.elapsed_s = static_cast<double>(now_ns - start_ns_) / 1e9;
  m.last_change_s = last_change_s_;
  m.windows = windows_before_ + windows_;
  for (const auto& t : knobs_) {
    TunerMemo::Knob k = t->learned;
    k.node = t->stats->name;
    k.param = t->knob->param();
    k.value = t->knob->value();
    m.knobs.push_back(std::move(k));
  }
  // Knobs of nodes this pipeline has not added (yet): as remembered.
  if (resumed_) {
    for (const TunerMemo::Knob& k : resumed_->knobs)
      if (!m.find(k.node, k.param)) m.knobs.push_back(k);
  }
  return m;
}

void Tuner::store_locked(int64_t now_ns) {
  if (memory_ && started_) memory_->store(memory_key_, memo_locked(now_ns));
}

std::optional<TunerMemo> Tuner::memo() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) return resumed_;
  return memo_locked(clock_->now_ns());
}

void Tuner::resume(const TunerMemo& memo) {
  if (!remember_) return;
  std::vector<std::pair<Tuned*, int64_t>> sets;  // Tuned objects live as long as the tuner
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    resumed_ = memo;
    resumed_from_ = "state";
    windows_before_ = memo.windows;
    last_change_s_ = memo.last_change_s;
    pending_last_change_ = memo.last_change_s;  // the policy's, at the next window
    if (started_) {
      start_ns_ = clock_->now_ns() - static_cast<int64_t>(memo.elapsed_s * 1e9);
      for (auto& t : knobs_) {
        const TunerMemo::Knob* k = memo.find(t->stats->name, t->knob->param());
        if (!k) continue;
        t->learned = *k;
        t->resume_policy = true;
        sets.emplace_back(t.get(), k->value);
      }
    }
  }
  for (const auto& [t, value] : sets) {
    t->knob->set(value);
    t->stats->set_value(t->knob->param(), static_cast<double>(t->knob->value()));
  }
}

nlohmann::json Tuner::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json j;
  j["cpu_budget"] = policy_.options().cpu_budget;
  j["ram_budget_mb"] = static_cast<double>(policy_.options().ram_budget_bytes) / 1048576.0;
  j["windows"] = windows_;
  j["remember"] = remember_;
  j["resumed"] = !resumed_from_.empty();
  j["resumed_from"] =
      resumed_from_.empty() ? nlohmann::json(nullptr) : nlohmann::json(resumed_from_);
  const double elapsed_s = started_   ? static_cast<double>(clock_->now_ns() - start_ns_) / 1e9
                           : resumed_ ? resumed_->elapsed_s
                                      : 0;
  j["elapsed_s"] = std::round(elapsed_s * 10) / 10;
  j["knobs"] = nlohmann::json::array();
  for (const auto& k : knobs_) {
    j["knobs"].push_back({{"node", k->stats->name},
                          {"param", k->knob->param()},
                          {"value", k->knob->value()},
                          {"min", k->knob->min()},
                          {"max", k->knob->max()}});
  }
  j["changes"] = changes_;
  if (scaler_) j["scale"] = scaler_->report();
  return j;
}

}  // namespace dataecho
