// BadRecords: the on_error policy of one file being read, shared by the file sources.
// Keeps the last good example (for kEcho), counts into the node's stats ("skipped",
// "repaired", "bytes_lost") and prints one summary line per file with problems to
// stderr when the file ends (or the iterator goes away). Buffers one Example.
// Not thread-safe: owned by one iterator.
#pragma once

#include <optional>
#include <string>

#include "dataecho/core/state.h"
#include "dataecho/core/stats.h"
#include "dataecho/formats/on_error.h"

namespace dataecho {

class BadRecords {
 public:
  BadRecords(std::string format, std::string uri, OnError policy)
      : format_(std::move(format)), uri_(std::move(uri)), policy_(policy) {}
  ~BadRecords() { finish(); }
  BadRecords(const BadRecords&) = delete;
  BadRecords& operator=(const BadRecords&) = delete;

  void good(const Example& e) {
    if (policy_ == OnError::kEcho) last_good_ = e;  // kept only where it may be repeated
    repeats_ = 0;
  }
  // A record that cannot be used. `lost_bytes` > 0 when the rest of the file is lost with
  // it. kFail: throws Error(kDataLoss, label, reason, "<uri> record N at byte B").
  // kEcho after a good example: the repeat to emit. Otherwise nullopt (skip it).
  std::optional<Example> bad(NodeStats* stats, const std::string& label, const std::string& reason,
                             int64_t record, uint64_t offset, uint64_t lost_bytes = 0);
  // As bad(), for a record that is a whole file of its own: the error names `where` (its
  // path and index) instead of an offset in uri.
  std::optional<Example> bad_file(NodeStats* stats, const std::string& label,
                                  const std::string& reason, const std::string& where);
  // Prints the file's summary once, if anything went wrong.
  void finish();

  void save(StateWriter& w) const;
  void restore(StateReader& r);

 private:
  std::optional<Example> handle(NodeStats* stats, const std::string& label, std::string why,
                                const std::string& where, std::string first, uint64_t lost_bytes);
  std::string format_, uri_;
  OnError policy_;
  std::optional<Example> last_good_;
  int32_t repeats_ = 0;
  int64_t skipped_ = 0, repaired_ = 0;
  uint64_t lost_ = 0;
  std::string first_;
  bool reported_ = false;
};

}  // namespace dataecho
