// /proc/self/status, smaps_rollup and clear_refs (see the header).
#include "dataecho/core/process_memory.h"

#include <fstream>

namespace dataecho {

namespace {

// A "Key: N kB" field of a /proc/self file; -1 where it is absent.
int64_t proc_self_kib(const char* file, const std::string& key) {
  std::ifstream f(file);
  std::string k;
  int64_t v = 0;
  while (f >> k) {
    if (k == key && f >> v) return v;
    f.ignore(1 << 12, '\n');
  }
  return -1;
}

}  // namespace

int64_t process_status_kib(const std::string& key) {
  return proc_self_kib("/proc/self/status", key);
}

int64_t process_pss_kib() { return proc_self_kib("/proc/self/smaps_rollup", "Pss:"); }

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // 5: reset the peak RSS
  clear.flush();
  return static_cast<bool>(clear);
}

}  // namespace dataecho
