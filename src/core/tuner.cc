#include "dataecho/core/tuner.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "dataecho/core/clock.h"
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

// A knob and what the tuner measured of its node in the last window.
struct Tuner::Tuned {
  std::shared_ptr<Knob> knob;
  std::shared_ptr<NodeStats> stats;
  std::atomic<int64_t>* cpu_ns = nullptr;             // the node's workers' CPU time (maps)
  int64_t busy = 0, cpu = 0, next = 0, elements = 0;  // the counters at the last sample
  double busy_share = 0;                              // workers' busy time / (window * threads)
  double cpu_per_thread = 0;                          // cores one of its threads used
  double wait_share = 0;  // the node's consumer's time in its next() / window
  // Echo knobs: the "fresh" and "echoed" counters, and the share of this window's rows
  // that were repeats (the gap the echo fills).
  std::atomic<int64_t>*fresh_rows = nullptr, *echoed_rows = nullptr;
  int64_t fresh = 0, echoed = 0;
  double repeat_share = 0;
  double blocked_until = -1;  // a failed raise: left alone until then (s)
  // The node's own elements since the last change (of any knob) and when that was: a
  // raise is judged on this node's rate. (The pipeline's output may be batches of 128:
  // too few in a window to measure a 5% gain; a map's elements are single examples.)
  int64_t elements_at_change = 0;
  double change_s = 0;
  int64_t since_change() const { return elements - elements_at_change; }
  double rate_since_change(double now_s) const {
    return now_s > change_s ? static_cast<double>(since_change()) / (now_s - change_s) : 0;
  }

  double bytes_per_element() const {
    const int64_t n = stats->elements.load();
    return n > 0 ? static_cast<double>(stats->bytes.load()) / static_cast<double>(n) : 0;
  }
  void sample(double dt_s) {
    const int64_t b = stats->busy_ns.load(), c = cpu_ns->load(), n = stats->next_ns.load(),
                  e = stats->elements.load();
    const double threads =
        knob->kind() == Knob::Kind::kParallelism ? static_cast<double>(knob->value()) : 1.0;
    busy_share = static_cast<double>(b - busy) / 1e9 / dt_s / threads;
    cpu_per_thread = static_cast<double>(c - cpu) / 1e9 / dt_s / threads;
    wait_share = static_cast<double>(n - next) / 1e9 / dt_s;
    busy = b, cpu = c, next = n, elements = e;
    if (fresh_rows) {
      const int64_t f = fresh_rows->load(), r = echoed_rows->load();
      const int64_t rows = (f - fresh) + (r - echoed);
      repeat_share = rows > 0 ? static_cast<double>(r - echoed) / static_cast<double>(rows) : 0;
      fresh = f, echoed = r;
    }
  }
};

// The tuner thread's own state between windows.
struct Tuner::Window {
  int64_t out_next_ns = 0, cpu_ns = 0;
  std::vector<Tuned*> knobs;  // this window's
  double last_change_s = -1e300;
  Tuned* trial = nullptr;  // a raise not yet judged
  int64_t trial_from = 0;
  double rate_before = 0;  // the trial node's elements/s before the raise
};

Tuner::Tuner(TunerOptions options, std::shared_ptr<NodeStats> output)
    : o_(options.resolved()),
      output_(std::move(output)),
      hardware_cores_(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

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
  t->elements = t->elements_at_change = stats->elements.load();
  if (knob->kind() == Knob::Kind::kEcho) {
    t->fresh_rows = &stats->counter("fresh");
    t->echoed_rows = &stats->counter("echoed");
    t->fresh = t->fresh_rows->load();
    t->echoed = t->echoed_rows->load();
  }
  if (!thread_.joinable()) start_ns_ = now_ns();
  t->change_s = static_cast<double>(now_ns() - start_ns_) / 1e9;
  stats->set_value(knob->param(), static_cast<double>(knob->value()));
  knobs_.push_back(std::move(t));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void Tuner::run() {
  Window w;
  w.out_next_ns = output_ ? output_->next_ns.load() : 0;
  w.cpu_ns = process_cpu_ns();
  const int64_t start = start_ns_;
  int64_t last = start;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const double window = window_at(static_cast<double>(now_ns() - start) / 1e9);
    cv_.wait_for(lock, std::chrono::duration<double>(window), [this] { return stop_; });
    if (stop_) return;
    const int64_t t = now_ns();
    const double dt = static_cast<double>(t - last) / 1e9;
    last = t;
    ++windows_;
    w.knobs.clear();
    for (auto& k : knobs_) w.knobs.push_back(k.get());
    lock.unlock();  // knobs' listeners take their nodes' locks: never under mu_

    const int64_t out_w = output_ ? output_->next_ns.load() : 0;
    const int64_t cpu = process_cpu_ns();
    const double consumer_wait = static_cast<double>(out_w - w.out_next_ns) / 1e9 / dt;
    const double cores = static_cast<double>(cpu - w.cpu_ns) / 1e9 / dt;
    w.out_next_ns = out_w, w.cpu_ns = cpu;
    for (Tuned* k : w.knobs) k->sample(dt);
    decide(w, static_cast<double>(t - start) / 1e9, consumer_wait, cores);

    lock.lock();
  }
}

double Tuner::ram_projection(const std::vector<Tuned*>& knobs, const Tuned* changed,
                             int64_t value) const {
  double bytes = 0;
  for (const Tuned* k : knobs) {
    const int64_t v = k == changed ? value : k->knob->value();
    double b = static_cast<double>(k->knob->buffered_elements(v)) * k->bytes_per_element();
    if (k->knob->max_buffered_bytes() > 0)
      b = std::min(b, static_cast<double>(k->knob->max_buffered_bytes()));
    bytes += b;
  }
  return bytes;
}

void Tuner::change(Window& w, Tuned& k, int64_t to, double now_s, const std::string& reason) {
  const int64_t from = k.knob->value();
  k.knob->set(to);
  to = k.knob->value();
  k.stats->set_value(k.knob->param(), static_cast<double>(to));
  k.stats->counter("tuner_changes").fetch_add(1, std::memory_order_relaxed);
  w.last_change_s = now_s;
  for (Tuned* t : w.knobs) t->elements_at_change = t->elements, t->change_s = now_s;
  std::lock_guard<std::mutex> lock(mu_);
  changes_.push_back({{"t_s", std::round(now_s * 10) / 10},
                      {"node", k.stats->name},
                      {"param", k.knob->param()},
                      {"from", from},
                      {"to", to},
                      {"reason", reason}});
}

// Long (about 150 lines): the tuner's decision is to be split together with its clock
// (a change of its own); until then it is one unit.
// NOLINTNEXTLINE(readability-function-size)
void Tuner::decide(Window& w, double now_s, double consumer_wait, double cores) {
  const std::vector<Tuned*>& knobs = w.knobs;
  const bool warm_up = now_s < o_.warmup_seconds;
  const double window = window_at(now_s);
  const double interval = warm_up ? window : o_.change_interval_seconds;
  // Strict after the warm-up (a change waits for the first window that ends a full
  // interval after the last); during it, the next window (woken a little early or late).
  if (now_s - w.last_change_s < (warm_up ? interval - 0.5 * window : interval)) return;
  // The budgets. The CPU one binds only below the machine's cores: a process cannot use
  // more than all of them.
  const bool cpu_limited = o_.cpu_budget < hardware_cores_ - 0.01;
  const auto budget_label = [&] {
    char s[96];
    std::snprintf(s, sizeof s, "%.2f cores used, budget %.2f", cores, o_.cpu_budget);
    return std::string(s);
  };
  if (cpu_limited && cores > o_.cpu_budget * 1.1 + 0.05) {
    Tuned* lower = w.trial;
    if (!lower) {
      double most = 0;
      for (Tuned* k : knobs) {
        const double cost = k->cpu_per_thread * static_cast<double>(k->knob->value());
        if (k->knob->kind() == Knob::Kind::kParallelism && k->knob->value() > k->knob->min() &&
            cost > most)
          most = cost, lower = k;
      }
    }
    if (lower) {
      const int64_t to = lower == w.trial ? w.trial_from : lower->knob->value() - 1;
      w.trial = nullptr;
      change(w, *lower, to, now_s, "over the CPU budget: " + budget_label());
      return;
    }
  }
  if (ram_projection(knobs, nullptr, 0) > static_cast<double>(o_.ram_budget_bytes)) {
    Tuned* lower = w.trial;
    for (Tuned* k : knobs)
      if (!lower && k->knob->kind() == Knob::Kind::kBuffer && k->knob->value() > k->knob->min())
        lower = k;
    if (lower) {
      const int64_t to = lower == w.trial ? w.trial_from : lower->knob->value() / 2;
      w.trial = nullptr;
      change(w, *lower, to, now_s, "over the RAM budget");
      return;
    }
  }
  // Judge the last raise on the windows since it (after the warm-up the first of them,
  // while threads start and buffers fill, is left out).
  if (w.trial) {
    Tuned* k = w.trial;
    w.trial = nullptr;
    if (k->since_change() < kMinElements && now_s - w.last_change_s < 8 * interval) {
      w.trial = k;  // too few elements yet to tell a 5% gain
      return;
    }
    const double after = k->rate_since_change(now_s);
    char why[160];
    std::snprintf(why, sizeof why, "%.0f -> %.0f elements/s", w.rate_before, after);
    if (after < w.rate_before * (1 + o_.min_gain)) {
      k->blocked_until = now_s + 4 * o_.change_interval_seconds;
      change(w, *k, w.trial_from, now_s, std::string("taken back: ") + why);
      return;
    }
    k->stats->counter("tuner_kept").fetch_add(1, std::memory_order_relaxed);
  }
  // The pipeline keeps up with its consumer, or would without the repeats an echo fills
  // in with: nothing to raise.
  double short_share = consumer_wait;
  for (const Tuned* k : knobs)
    if (k->knob->kind() == Knob::Kind::kEcho) short_share = std::max(short_share, k->repeat_share);
  if (short_share < 0.05) return;

  // The most likely bottleneck: the busiest map first, then the buffer waited on most;
  // last, when no other setting can rise (none left untested), an echo's cap.
  Tuned* best = nullptr;
  int64_t best_to = 0;
  double best_score = 0;
  // A knob that may still rise but has not yet run 20 elements since it was added or last
  // changed: an echo waits for it to be judged.
  bool untested = false;
  for (const Tuned* k : knobs) {
    const Knob& kn = *k->knob;
    untested = untested || (kn.kind() != Knob::Kind::kEcho && kn.value() < kn.max() &&
                            now_s >= k->blocked_until && k->since_change() < kMinElements &&
                            now_s - k->change_s < 8 * interval);
  }
  for (int pass = 0; pass < 3 && !best; ++pass) {
    for (Tuned* k : knobs) {
      const Knob& kn = *k->knob;
      const int64_t v = kn.value();
      if (v >= kn.max() || now_s < k->blocked_until) continue;
      // Its rate so far must be measured on enough elements to judge the raise against.
      if (k->since_change() < kMinElements && now_s - w.last_change_s < 8 * interval) continue;
      int64_t to = 0;
      double score = 0;
      if (pass == 0 && kn.kind() == Knob::Kind::kParallelism) {
        if (k->busy_share < 0.5) continue;  // its workers wait for input or for room
        score = k->busy_share;
        to = warm_up && k->busy_share >= 0.9 ? 2 * v : v + 1;
        to = std::min({to, kn.max(), o_.max_parallelism});
        // Threads that would need more CPU than the budget, or than the machine has,
        // are not added. (Against the machine, with half a core of slack: the consumer
        // and the other stages use some, and a stage that waits part of the time may
        // still gain from one thread more.)
        const double limit = cpu_limited ? o_.cpu_budget + 0.05 : hardware_cores_ + 0.5;
        while (to > v && cores + k->cpu_per_thread * static_cast<double>(to - v) > limit) --to;
      } else if (pass == 1 && kn.kind() == Knob::Kind::kBuffer) {
        if (k->wait_share < 0.05) continue;
        score = k->wait_share;
        to = std::min(2 * v, kn.max());
      } else if (pass == 2 && kn.kind() == Knob::Kind::kEcho) {
        // Only for a consumer that waits (not for repeats already made), and only once
        // the other settings have had their chance.
        if (consumer_wait < 0.05 || untested) continue;
        score = consumer_wait;
        to = kn.max();
      } else {
        continue;
      }
      if (to <= v) continue;
      if (ram_projection(knobs, k, to) > static_cast<double>(o_.ram_budget_bytes)) continue;
      if (score > best_score) best = k, best_to = to, best_score = score;
    }
  }
  if (!best) return;
  w.rate_before = best->rate_since_change(now_s);
  w.trial_from = best->knob->value();
  char why[200];
  if (best->knob->kind() == Knob::Kind::kEcho) {
    std::snprintf(why, sizeof why,
                  "consumer waits %.0f%% of the time and no other setting can rise: echo fills "
                  "the gap; %s",
                  consumer_wait * 100, budget_label().c_str());
  } else if (short_share > consumer_wait) {
    std::snprintf(why, sizeof why,
                  "an echo repeats %.0f%% of the rows (consumer waits %.0f%%); node busy %.0f%%, "
                  "%s",
                  short_share * 100, consumer_wait * 100, best->busy_share * 100,
                  budget_label().c_str());
  } else {
    std::snprintf(why, sizeof why, "consumer waits %.0f%% of the time; node busy %.0f%%, %s",
                  consumer_wait * 100, best->busy_share * 100, budget_label().c_str());
  }
  change(w, *best, best_to, now_s, why);
  w.trial = best;
}

nlohmann::json Tuner::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json j;
  j["cpu_budget"] = o_.cpu_budget;
  j["ram_budget_mb"] = static_cast<double>(o_.ram_budget_bytes) / 1048576.0;
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
