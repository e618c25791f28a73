// Per-node statistics: what each pipeline node produced and where its time went.
// Thread-safe: counters are atomics updated by the node's threads and read by anyone.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dataecho {

class MemoryWatch;

struct NodeStats {
  explicit NodeStats(std::string node_name, bool owns_threads = false)
      : name(std::move(node_name)), async(owns_threads) {}

  const std::string name;  // "3:shuffle"
  // True for nodes with their own threads: they measure busy and wait times in their
  // workers. For the others busy = time in next() minus time in the input's next().
  const bool async;

  std::atomic<int64_t> elements{0};        // elements returned by next()
  std::atomic<int64_t> rows{0};            // rows in them (batch size, or 1)
  std::atomic<int64_t> bytes{0};           // tensor bytes returned
  std::atomic<int64_t> next_ns{0};         // time consumers spent inside next()
  std::atomic<int64_t> busy_ns{0};         // async nodes: workers' time doing the node's work
  std::atomic<int64_t> wait_input_ns{0};   // async nodes: workers' time waiting for the input
  std::atomic<int64_t> wait_output_ns{0};  // time blocked waiting for room downstream
  // The start of a timed call to next() in progress (core/clock.h's now_ns(); 0: none), so
  // that a long wait is seen while it lasts (next_ns counts a call once it returns).
  std::atomic<int64_t> next_since_ns{0};

  // The time consumers spent inside next() up to `now` (on now_ns()'s clock): next_ns
  // and the call in progress, counted from its start. A window's wait measured on it
  // counts a wait that spans several windows in each of them, not all in the one where
  // next() returns.
  int64_t next_ns_at(int64_t now) const;

  // The memory check's watches on this node's elements (core/memory_watch.h), told the
  // count and bytes so far at counts 1, 2, 4, ...; set while the pipeline is built,
  // before any iterator runs.
  std::vector<std::shared_ptr<const MemoryWatch>> watches;

  // A named counter owned by the node ("fresh", "echoed", "skipped"); the reference
  // stays valid for the life of this object.
  std::atomic<int64_t>& counter(const std::string& key);
  // A named value set by the node (achieved echo factor, ...).
  void set_value(const std::string& key, double value);

  std::map<std::string, int64_t> counters() const;
  std::map<std::string, double> values() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::atomic<int64_t>> counters_;
  std::map<std::string, double> values_;
};

// The stats of a pipeline's nodes in order, source first.
class PipelineStats {
 public:
  void add(std::shared_ptr<NodeStats> node) { nodes_.push_back(std::move(node)); }
  const std::vector<std::shared_ptr<NodeStats>>& nodes() const { return nodes_; }
  void set_wall_ns(int64_t ns) { wall_ns_ = ns; }

  // One object per node: name, elements, rows, bytes, busy_ms, wait_input_ms,
  // wait_output_ms, next_ms, rate (elements/s of wall time) and the node's counters.
  nlohmann::json to_json() const;
  // The same as an aligned text table.
  std::string to_table() const;

 private:
  std::vector<std::shared_ptr<NodeStats>> nodes_;
  int64_t wall_ns_ = 0;
};

}  // namespace dataecho
