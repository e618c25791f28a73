// CRC-32C. The hardware path (SSE4.2 `crc32`, chosen at run time) runs three
// independent CRC streams over three consecutive blocks of a buffer, so that the
// instruction's 3-cycle latency is hidden (one instruction per cycle instead of one
// per three), then joins them with the CRC's linearity:
//   reg(A ++ B) = shift_|B|(reg(A)) ^ reg_0(B)
// where reg is the raw CRC register (no pre/post inversion), reg_0 starts from 0, and
// shift_L advances a register over L zero bytes: a linear map on GF(2)^32, applied
// with four 256-entry tables (one per byte of the register) precomputed per block size.
#include "dataecho/formats/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace dataecho::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

uint32_t extend_table(uint32_t crc, const uint8_t* p, size_t n) {
  const auto& t = tables().t;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian host assumed for the sliced path
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

#if defined(__x86_64__)

// Bytes per stream of the two block sizes: long blocks for the bulk of a large buffer
// (the joining cost, 8 table lookups, is nothing next to 3 x 8 KiB), short ones for
// what is left (down to 3 x 256 bytes), then one stream for the tail.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

// shift_L as tables: shift(c) = t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ ... (linear).
struct ShiftTable {
  uint32_t t[4][256];
  explicit ShiftTable(size_t zero_bytes) {
    const auto& t0 = tables().t[0];
    // The image of each of the 32 basis vectors, one zero byte at a time.
    uint32_t basis[32];
    for (int b = 0; b < 32; ++b) {
      uint32_t c = uint32_t{1} << b;
      for (size_t i = 0; i < zero_bytes; ++i) c = (c >> 8) ^ t0[c & 0xff];
      basis[b] = c;
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t r = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if (v & (1u << bit)) r ^= basis[8 * k + bit];
        }
        t[k][v] = r;
      }
    }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

const ShiftTable& shift_long() {
  static const ShiftTable s(kLong);
  return s;
}
const ShiftTable& shift_short() {
  static const ShiftTable s(kShort);
  return s;
}

// Three interleaved streams over blocks of `len` bytes (a multiple of 8) while 3 * len
// bytes are left; `c` is the raw register. Returns the register after them.
template <size_t len>
__attribute__((target("sse4.2"), always_inline)) inline uint64_t three_way(
    uint64_t c, const uint8_t*& p, size_t& n, const ShiftTable& shift) {
  while (n >= 3 * len) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* a = p;
    const uint8_t* b = p + len;
    const uint8_t* d = p + 2 * len;
    for (size_t i = 0; i < len; i += 8) {
      uint64_t va, vb, vd;
      std::memcpy(&va, a + i, 8);
      std::memcpy(&vb, b + i, 8);
      std::memcpy(&vd, d + i, 8);
      c = _mm_crc32_u64(c, va);
      c1 = _mm_crc32_u64(c1, vb);
      c2 = _mm_crc32_u64(c2, vd);
    }
    c = shift(static_cast<uint32_t>(c)) ^ c1;
    c = shift(static_cast<uint32_t>(c)) ^ c2;
    p += 3 * len;
    n -= 3 * len;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  if (n >= 3 * kLong) c = three_way<kLong>(c, p, n, shift_long());
  if (n >= 3 * kShort) c = three_way<kShort>(c, p, n, shift_short());
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  while (n--) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

bool have_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

}  // namespace

uint32_t extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
  if (have_sse42()) return extend_sse42(crc, p, n);
#endif
  return extend_table(crc, p, n);
}

uint32_t extend_portable(uint32_t crc, const void* data, size_t n) {
  return extend_table(crc, static_cast<const uint8_t*>(data), n);
}

bool hardware_accelerated() {
#if defined(__x86_64__)
  return have_sse42();
#else
  return false;
#endif
}

}  // namespace dataecho::crc32c
