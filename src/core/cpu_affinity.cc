#include "dataecho/core/cpu_affinity.h"

#include <sched.h>

#include <mutex>
#include <string>

#include "dataecho/core/error.h"

namespace dataecho {
namespace {

std::mutex& engine_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<int>& engine_set() {
  static std::vector<int> set;
  return set;
}

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool pin_current_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return false;
    CPU_SET(c, &set);
  }
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

void set_engine_cpus(std::vector<int> cpus) {
  std::lock_guard<std::mutex> lock(engine_mu());
  engine_set() = std::move(cpus);
}

std::vector<int> engine_cpus() {
  std::lock_guard<std::mutex> lock(engine_mu());
  return engine_set();
}

void pin_to_engine_cpus() {
  std::vector<int> cpus = engine_cpus();
  if (!cpus.empty()) pin_current_thread(cpus);
}

std::pair<std::vector<int>, std::vector<int>> split_cpus(const std::vector<int>& allowed, int n) {
  if (n < 1 || static_cast<size_t>(n) >= allowed.size())
    throw_error(ErrorCode::kInvalidArgument, "cpu split",
                "--cpu-split " + std::to_string(n) + " needs between 1 and " +
                    std::to_string(static_cast<int>(allowed.size()) - 1) +
                    " CPUs for the train step: the process may run on " +
                    std::to_string(allowed.size()) + ", and the pipeline needs one at least");
  std::vector<int> own(allowed.begin(), allowed.begin() + n);
  std::vector<int> engine(allowed.begin() + n, allowed.end());
  return {own, engine};
}

}  // namespace dataecho
