#pragma once
// How a saved state (StateWriter / StateReader) and a service frame write an element's
// rows: per row its id, then one 64-bit slot with the echo index in the low half and the
// epoch in the high half (states written before epochs existed have 0 there, and read
// back as epoch 0). One definition for both, so that a frame's bytes stay the state's.
#include <cstdint>
#include <utility>
#include <vector>

#include "dataecho/core/example.h"

namespace dataecho {

inline uint64_t pack_echo_epoch(const RowMeta& r) {
  return static_cast<uint64_t>(static_cast<uint32_t>(r.epoch)) << 32 |
         static_cast<uint32_t>(r.echo);
}

inline void unpack_echo_epoch(uint64_t slot, RowMeta& r) {
  r.echo = static_cast<int32_t>(static_cast<uint32_t>(slot));
  r.epoch = static_cast<int32_t>(static_cast<uint32_t>(slot >> 32));
}

// Gives `e` the rows read back: every row for a batch, else the first row's id, echo
// index and epoch.
inline void set_rows_read(Example& e, bool batch, std::vector<RowMeta> rows) {
  if (batch) {
    e.set_rows(std::move(rows));
  } else if (!rows.empty()) {
    e.set_id(rows[0].id);
    e.set_echo(rows[0].echo);
    e.stamp_epoch(rows[0].epoch);
  }
}

}  // namespace dataecho
