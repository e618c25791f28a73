// The dispatcher's journal: every entry that changes its state (dispatcher_state.h),
// written before the state changes and synced (fdatasync) before the dispatcher replies,
// so that a dispatcher killed at any moment comes back to a state its clients saw.
// Files DIR/journal-000001.log, journal-000002.log, ...: one per start, each an entry per
// record in TFRecord's framing (length, masked CRC-32C of it, the serialized
// JournalEntry, its masked CRC-32C). A start replays them all in order, then opens the
// next. When the files replayed hold more than `compact_bytes` (64 MiB), the state is
// written as one snapshot entry into a file of its own, synced, and the older files
// removed; a start replays from the newest file that opens with a snapshot. A torn last record of a
// file (the process stopped while writing it) is dropped with a warning; a damaged record before
// the end, or an entry that does not apply, is refused naming the file and the record's byte
// offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "service/dispatcher_state.h"

namespace dataecho::service {

// Replays one journal file into `state`; a line per torn tail goes to `warnings`.
// Returns the entries applied.
int64_t replay_journal(const std::string& path, DispatcherState& state,
                       std::vector<std::string>* warnings);

class Journal {
 public:
  // Replays DIR's journal files into `state` (created if DIR is missing); the next file
  // is created by the first append, so that a start that journals nothing leaves none.
  Journal(const std::string& dir, DispatcherState& state,
          std::vector<std::string>* warnings = nullptr, uint64_t compact_bytes = 64 << 20);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Writes one entry and syncs it to the disk; throws naming the file on failure.
  void append(const JournalEntry& entry);
  const std::string& path() const { return path_; }
  int64_t replayed() const { return replayed_; }  // entries read at the start
  bool compacted() const { return compacted_; }   // whether the start compacted

 private:
  std::string dir_;
  std::string path_;  // the file appends go to
  int fd_ = -1;       // open from the first append
  int64_t replayed_ = 0;
  bool compacted_ = false;
};

}  // namespace dataecho::service
