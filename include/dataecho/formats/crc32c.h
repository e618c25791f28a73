// CRC-32C (Castagnoli), as TFRecord framing uses it. Uses the SSE4.2 crc32 instruction
// when the CPU has it (three interleaved streams over large buffers, joined with
// precomputed shift tables: several GB/s), a slicing-by-8 table otherwise. Thread-safe
// (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dataecho::crc32c {

// Extends `crc` (the CRC of the bytes before) with `n` more bytes; value(p, n) = extend(0, p, n).
uint32_t extend(uint32_t crc, const void* data, size_t n);
inline uint32_t value(const void* data, size_t n) { return extend(0, data, n); }

// The slicing-by-8 table implementation whatever the CPU (tests, benchmarks).
uint32_t extend_portable(uint32_t crc, const void* data, size_t n);
// Whether extend() uses the SSE4.2 instruction on this CPU.
bool hardware_accelerated();

// TFRecord's masking: rotate right by 15 and add a constant, so that a CRC over data
// that itself holds CRCs stays well distributed.
constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace dataecho::crc32c
