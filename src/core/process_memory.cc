// /proc/self/status and clear_refs (see the header).
#include "dataecho/core/process_memory.h"

#include <fstream>

namespace dataecho {

int64_t process_status_kib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string k;
  int64_t v = 0;
  while (status >> k) {
    if (k == key && status >> v) return v;
    status.ignore(1 << 10, '\n');
  }
  return -1;
}

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // 5: reset the peak RSS
  clear.flush();
  return static_cast<bool>(clear);
}

}  // namespace dataecho
