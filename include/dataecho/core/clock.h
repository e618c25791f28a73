// Monotonic time in nanoseconds, for stats and rates; CPU time of the process (all its
// threads) and of the calling thread, user + system, for CPU budgets and per-CPU rates.
//
// Clock: the same two readings (monotonic time, the process's CPU time) behind an
// interface, for the code whose decisions depend on them (the tuner, core/tuner.h): the
// default reads the real clocks; a test passes a ManualClock and moves it itself, so that
// what it checks does not depend on how fast the machine runs.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace dataecho {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t cpu_clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
inline int64_t process_cpu_ns() { return cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
inline int64_t thread_cpu_ns() { return cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

// Thread-safety: both readings may be taken from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_ns() const = 0;          // monotonic
  virtual int64_t process_cpu_ns() const = 0;  // the process's CPU time
  // The real clocks (steady_clock, CLOCK_PROCESS_CPUTIME_ID); one shared instance.
  static std::shared_ptr<const Clock> real();
};

// A clock that moves only when told to: advance() moves the time, and the CPU time by
// `cores` times as much (the cores the process is taken to have used meanwhile).
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 0) : now_(start_ns) {}
  int64_t now_ns() const override { return now_.load(std::memory_order_acquire); }
  int64_t process_cpu_ns() const override { return cpu_.load(std::memory_order_acquire); }
  void advance(int64_t ns, double cores = 0) {
    now_.fetch_add(ns, std::memory_order_acq_rel);
    cpu_.fetch_add(static_cast<int64_t>(static_cast<double>(ns) * cores),
                   std::memory_order_acq_rel);
  }
  void advance_seconds(double s, double cores = 0) {
    advance(static_cast<int64_t>(s * 1e9), cores);
  }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> cpu_{0};
};

namespace detail {
class RealClock final : public Clock {
 public:
  int64_t now_ns() const override { return dataecho::now_ns(); }
  int64_t process_cpu_ns() const override { return dataecho::process_cpu_ns(); }
};
}  // namespace detail

inline std::shared_ptr<const Clock> Clock::real() {
  static const std::shared_ptr<const Clock> clock = std::make_shared<detail::RealClock>();
  return clock;
}

}  // namespace dataecho
