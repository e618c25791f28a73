// CRC-32C (Castagnoli), as TFRecord framing uses it. The fastest implementation the
// CPU has, chosen at run time: carry-less-multiply folding with AVX-512 VPCLMULQDQ for
// large buffers, else the SSE4.2 crc32 instruction (three interleaved streams joined
// with precomputed shift tables), else a slicing-by-8 table. Thread-safe (pure
// functions).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dataecho::crc32c {

// Extends `crc` (the CRC of the bytes before) with `n` more bytes; value(p, n) = extend(0, p, n).
uint32_t extend(uint32_t crc, const void* data, size_t n);
inline uint32_t value(const void* data, size_t n) { return extend(0, data, n); }
// extend(crc, src, n), copying the n bytes to dst (not overlapping src) in the same pass.
uint32_t extend_copy(uint32_t crc, void* dst, const void* src, size_t n);

// The slicing-by-8 table implementation whatever the CPU (tests, benchmarks).
uint32_t extend_portable(uint32_t crc, const void* data, size_t n);
// Whether extend() uses a CPU instruction (SSE4.2 or AVX-512) rather than the table.
bool hardware_accelerated();

// The implementations, for tests and benchmarks (extend() picks the fastest).
enum class Impl { kTable, kSse42, kAvx512 };
bool supported(Impl impl);
Impl best_impl();
// extend_copy with the given implementation (the table where it is unsupported); dst
// may be null (no copy).
uint32_t extend_with(Impl impl, uint32_t crc, void* dst, const void* src, size_t n);

// TFRecord's masking: rotate right by 15 and add a constant, so that a CRC over data
// that itself holds CRCs stays well distributed.
constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace dataecho::crc32c
