// The adaptive mode of `echo` (include/dataecho/ops/echo.h), internal to src/ops:
// make_echo validates the options (validate_echo_options) and calls it. Also the echo
// counters both modes keep.
#pragma once

#include <atomic>

#include "dataecho/core/stats.h"
#include "dataecho/ops/echo.h"

namespace dataecho {

// The node's echo counters, looked up once per iterator (NodeStats::counter takes a lock).
// The echo counters of both modes, looked up once per iterator (NodeStats::counter
// takes a lock): rows emitted "fresh" (echo index 0) and "echoed", and the value
// "achieved_factor" published from them for the first 64 elements and every 64th after
// (a lock and a map lookup: not on every element), and at the end.
class EchoCounters {
 public:
  explicit EchoCounters(NodeStats* node)
      : node_(node),
        fresh_(node ? &node->counter("fresh") : nullptr),
        echoed_(node ? &node->counter("echoed") : nullptr) {}
  // One element emitted: fresh or a copy, of `rows` rows.
  void emitted(bool fresh, int64_t rows) {
    if (std::atomic<int64_t>* c = fresh ? fresh_ : echoed_)
      c->fetch_add(rows, std::memory_order_relaxed);
    if (++emitted_ <= 64 || (emitted_ & 63) == 0) publish();
  }
  void publish() {
    if (!node_) return;
    int64_t f = fresh_->load(std::memory_order_relaxed);
    int64_t e = echoed_->load(std::memory_order_relaxed);
    if (f > 0)
      node_->set_value("achieved_factor", static_cast<double>(f + e) / static_cast<double>(f));
  }

 private:
  NodeStats* node_;
  std::atomic<int64_t>* fresh_;
  std::atomic<int64_t>* echoed_;
  uint64_t emitted_ = 0;
};

DatasetPtr make_adaptive_echo(DatasetPtr input, const EchoOptions& options);

}  // namespace dataecho
