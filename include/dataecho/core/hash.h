// A fixed 64-bit hash of bytes (FNV-1a): the same on every compiler and run, unlike
// std::hash. Names things that persist: a state's fingerprint, a disk cache's key, a
// cached shard's file name. Not for security.
#pragma once

#include <cstdint>
#include <string_view>

namespace dataecho {

inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace dataecho
