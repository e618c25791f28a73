#include "dataecho/core/memory_watch.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "dataecho/core/error.h"

namespace dataecho {

MemoryAction memory_action(const MemoryCheckOptions& o) {
  const std::string a = o.action.value_or("warn");
  if (a == "off") return MemoryAction::kOff;
  if (a == "error") return MemoryAction::kError;
  return MemoryAction::kWarn;
}

int64_t memory_limit_bytes(const MemoryCheckOptions& o) {
  if (o.limit_mb) return static_cast<int64_t>(*o.limit_mb * 1048576.0);
  const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return static_cast<int64_t>(physical * o.share.value_or(0.125));
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, u == 0 || bytes >= 100 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return b;
}

MemoryWatch::MemoryWatch(std::string stage, std::string holds, int64_t capacity,
                         const MemoryCheckOptions& o)
    : stage_(std::move(stage)),
      holds_(std::move(holds)),
      capacity_(capacity),
      limit_(memory_limit_bytes(o)),
      share_(o.share.value_or(0.125)),
      fixed_limit_(o.limit_mb.has_value()),
      action_(memory_action(o)) {}

std::string MemoryWatch::verdict(double bytes_each, const std::string& basis) const {
  const double projected = bytes_each * static_cast<double>(capacity_);
  if (projected <= static_cast<double>(limit_)) return "";
  char share[32];
  std::snprintf(share, sizeof share, "%g%%", share_ * 100);
  return stage_ + ": " + holds_ + " of about " + human_bytes(bytes_each) + " each (" + basis +
         ") come to about " + human_bytes(projected) + ", over " +
         (fixed_limit_ ? "the memory_check limit of " + human_bytes(static_cast<double>(limit_))
                       : std::string(share) + " of this machine's memory (" +
                             human_bytes(static_cast<double>(limit_)) + ")") +
         ": put a shuffle before decoding, or make this buffer smaller (\"memory_check\": "
         "{\"action\": \"error\"} makes this an error, \"off\" silences it)";
}

void MemoryWatch::report(const std::string& message) const {
  if (message.empty() || action_ == MemoryAction::kOff || reported_.exchange(true)) return;
  if (action_ == MemoryAction::kError)
    throw Error(ErrorCode::kInvalidArgument, stage_, "memory_check: " + message);
  std::cerr << "dataecho: warning: " << message << "\n";
}

void MemoryWatch::observe(int64_t elements, int64_t bytes) const {
  if (action_ == MemoryAction::kOff || elements <= 0 || reported_.load(std::memory_order_relaxed))
    return;
  // A few elements first, unless the buffer holds fewer.
  if (elements < 8 && elements < capacity_) return;
  report(verdict(static_cast<double>(bytes) / static_cast<double>(elements),
                 "measured on the first " + std::to_string(elements)));
}

void MemoryWatch::observe_known(double bytes_each, const std::string& basis) const {
  if (action_ == MemoryAction::kOff) return;
  report(verdict(bytes_each, basis));
}

}  // namespace dataecho
