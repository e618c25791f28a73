// The trainer's files and what it keeps in them, apart from the run: whole files read
// and written, the checkpoint directory published atomically, a model's weights as
// bytes, and the set of (id, epoch) reads that a checkpoint saves. Private to the
// trainer (src/train). Thread-safety: plain functions; a ReadSet is not shared.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/train/model.h"

namespace dataecho::train::run_io {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& bytes);
std::string read_file(const fs::path& path);
// fsync(2) on a file or directory, so that a rename after it publishes complete files.
void sync_path(const fs::path& path);

// Publishes a checkpoint atomically: `fill` writes every file into `out`/checkpoint.tmp/,
// which is synced and renamed to `out`/checkpoint (the previous one survives as
// checkpoint.old until then).
void publish_checkpoint(const fs::path& out, const std::function<void(const fs::path&)>& fill);

// A model's parameters and buffers, serialized (LibTorch's archive format), and back.
std::string model_bytes(ClassifierImpl& model);
void load_model_bytes(ClassifierImpl& model, const std::string& bytes);

template <class T>
nlohmann::json opt_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// A fresh read from storage: the source id and the pass (epoch) that read it; with
// `copy`, which copy of that read (the language model's sequence copies, >= 0).
struct ReadKey {
  int64_t id;
  int32_t epoch;
  int32_t copy = 0;
};

// A set of ReadKeys in one open-addressing table (linear probing, a power-of-two
// capacity at most half full), not a node per key as std::unordered_set. The set grows
// by a few KiB every step for the whole run, and its nodes, long-lived and allocated
// between the steps' large LibTorch buffers, split the freed buffers in the heap
// (tune_allocator_for_pipelines keeps them there): each step then needed fresh heap.
// Measured: peak RSS grew by about 170 MiB/s, to 3 GB over 1,500 steps of the protocol's
// CNN without evaluations (4.4 and 6.1 GB in two of the distributed experiment's
// baseline runs); with this table it stays flat (docs/train.md, "Memory").
class ReadSet {
 public:
  // True when `k` was not in the set.
  bool insert(const ReadKey& k) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = hash(k) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.copy < 0) {
        s = {k.id, k.epoch, k.copy};
        ++size_;
        return true;
      }
      if (s.id == k.id && s.epoch == k.epoch && s.copy == k.copy) return false;
    }
  }
  size_t size() const { return size_; }
  // Empties the set and keeps its memory.
  void clear() {
    if (size_ == 0) return;
    std::fill(slots_.begin(), slots_.end(), Slot{});
    size_ = 0;
  }
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.copy >= 0) f(ReadKey{s.id, s.epoch, s.copy});
  }

 private:
  struct Slot {  // 16 bytes: an unused slot has copy -1
    int64_t id = 0;
    int32_t epoch = 0;
    int32_t copy = -1;
  };
  static size_t hash(const ReadKey& k) {
    const uint64_t epoch_copy = static_cast<uint64_t>(static_cast<uint32_t>(k.epoch)) |
                                static_cast<uint64_t>(static_cast<uint32_t>(k.copy)) << 32;
    uint64_t h =
        static_cast<uint64_t>(k.id) * 0x9E3779B97F4A7C15ull ^ (epoch_copy * 0xC2B2AE3D27D4EB4Full);
    return static_cast<size_t>(h ^ (h >> 29));
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    size_ = 0;
    for (const Slot& s : old)
      if (s.copy >= 0) insert({s.id, s.epoch, s.copy});
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// A read set as bytes for the checkpoint, and back: 12 per key (id, epoch), or 16 with
// `copies` (id, epoch, copy).
inline std::string save_read_set(const ReadSet& set, bool copies = false) {
  const size_t key_bytes = copies ? 16 : 12;
  std::string bytes;
  bytes.reserve(set.size() * key_bytes);
  set.for_each([&](const ReadKey& k) {
    bytes.append(reinterpret_cast<const char*>(&k.id), sizeof k.id);
    bytes.append(reinterpret_cast<const char*>(&k.epoch), sizeof k.epoch);
    if (copies) bytes.append(reinterpret_cast<const char*>(&k.copy), sizeof k.copy);
  });
  return bytes;
}
inline ReadSet load_read_set(const std::string& bytes, bool copies = false) {
  const size_t key_bytes = copies ? 16 : 12;
  ReadSet set;
  for (size_t at = 0; at + key_bytes <= bytes.size(); at += key_bytes) {
    ReadKey k{0, 0, 0};
    std::memcpy(&k.id, bytes.data() + at, sizeof k.id);
    std::memcpy(&k.epoch, bytes.data() + at + 8, sizeof k.epoch);
    if (copies) std::memcpy(&k.copy, bytes.data() + at + 12, sizeof k.copy);
    set.insert(k);
  }
  return set;
}

// The union of several read sets' bytes (the ranks' of elastic sharding), as bytes.
inline std::string united_read_sets(const std::vector<std::string>& sets, bool copies = false) {
  std::string all;
  for (const std::string& s : sets) all += s;
  return save_read_set(load_read_set(all, copies), copies);
}

}  // namespace dataecho::train::run_io
