// The memory check of a pipeline's buffers (the spec's "memory_check", docs/design.md
// "Memory bounds"): each stage that holds many elements (shuffle, prefetch, a map's
// buffer, adaptive echo) is projected at its capacity from the size of the elements it
// holds, measured on the first ones (at counts 1, 2, 4, ... of the node they come from),
// or known when the pipeline is built (decode_augment's crop), and a projection over a
// share of the machine's memory is reported once: a warning on standard error, or an
// error that stops the pipeline.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace dataecho {

struct MemoryCheckOptions {
  // The limit: `limit_mb` MiB, else `share` of the machine's physical memory (default
  // 1/8, the tuner's RAM budget).
  std::optional<double> share = std::nullopt;
  std::optional<double> limit_mb = std::nullopt;
  // "warn" (default), "error" or "off".
  std::optional<std::string> action = std::nullopt;
  friend bool operator==(const MemoryCheckOptions&, const MemoryCheckOptions&) = default;
};

enum class MemoryAction { kOff, kWarn, kError };

MemoryAction memory_action(const MemoryCheckOptions& o);
// The limit in bytes on this machine.
int64_t memory_limit_bytes(const MemoryCheckOptions& o);
// "1.2 GB", "602 KB": a size for a person.
std::string human_bytes(double bytes);

// One stage's buffer under watch.
class MemoryWatch {
 public:
  // `stage`: its label and what it holds ("3:shuffle", "its buffer of 10000 elements");
  // `capacity`: the elements it holds at most.
  MemoryWatch(std::string stage, std::string holds, int64_t capacity, const MemoryCheckOptions& o);

  // After `elements` elements of `bytes` bytes in all from the node it watches: reports
  // once when the projection is over the limit. Thread-safe.
  void observe(int64_t elements, int64_t bytes) const;
  // At build time, elements of at least `bytes_each` bytes (`basis` says why).
  void observe_known(double bytes_each, const std::string& basis) const;

  int64_t capacity() const { return capacity_; }
  // The message for `bytes_each` (measured on `basis`), or "" within the limit.
  std::string verdict(double bytes_each, const std::string& basis) const;

 private:
  void report(const std::string& message) const;
  std::string stage_, holds_;
  int64_t capacity_;
  int64_t limit_;
  double share_;
  bool fixed_limit_;
  MemoryAction action_;
  mutable std::atomic<bool> reported_{false};
};

}  // namespace dataecho
