// The uint8 output's vertical pass (see resample.h): AVX2 and AVX-512 kernels that run
// the vertical filter over an output row's channel planes, round and clamp in registers
// and store the pixels with their channels interleaved. They replace the plain path's
// two passes (the vertical filter into a float row, then round_u8 per value through a
// strided store), which perf put at 35% of a data-service worker that emits uint8
// crops. The same operations in the same order as the plain path, so the same bits;
// compiled with -ffp-contract=off like resize.cc (CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "image/resample.h"

namespace dataecho::detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// pshufb masks that interleave three planes of 16 bytes into 16 pixels (48 bytes): the
// mask for output vector q and plane c takes byte p / 3 of plane c into byte i of
// vector q wherever pixel byte p = 16 q + i is of channel c (p % 3 == c), else 0.
struct InterleaveMasks {
  alignas(16) int8_t m[3][3][16];
  constexpr InterleaveMasks() : m{} {
    for (int q = 0; q < 3; ++q)
      for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 16; ++i) {
          const int p = 16 * q + i;
          m[q][c][i] = static_cast<int8_t>(p % 3 == c ? p / 3 : -1);
        }
  }
};
constexpr InterleaveMasks kInterleave;

// The masks in registers, loaded once per row: the pixel stores (uint8_t) may alias
// anything, so the compiler would reload them from memory after each store.
struct Masks {
  __m128i m[3][3];
};

__attribute__((target("avx2"), always_inline)) inline Masks load_masks() {
  Masks r;
  for (int q = 0; q < 3; ++q)
    for (int c = 0; c < 3; ++c)
      r.m[q][c] = _mm_load_si128(reinterpret_cast<const __m128i*>(kInterleave.m[q][c]));
  return r;
}

// 16 pixels from their three channels' 16 bytes each.
__attribute__((target("avx2"), always_inline)) inline void store_rgb16(const Masks& m, __m128i r,
                                                                       __m128i g, __m128i b,
                                                                       uint8_t* out) {
  for (int q = 0; q < 3; ++q) {
    const __m128i v =
        _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r, m.m[q][0]), _mm_shuffle_epi8(g, m.m[q][1])),
                     _mm_shuffle_epi8(b, m.m[q][2]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * q), v);
  }
}

// Pixels [o, n) one value at a time, as the plain path computes them (the kernels'
// remainder).
inline void vfilter_u8_from(int o, const float* const* rows, const float* w, int k, int n,
                            int channels, uint8_t* out) {
  for (; o < n; ++o)
    for (int c = 0; c < channels; ++c) {
      const size_t i = static_cast<size_t>(c) * n + o;
      float a = rows[0][i] * w[0];
      for (int j = 1; j < k; ++j) a += rows[j][i] * w[j];
      out[static_cast<size_t>(o) * channels + c] = round_u8(a);
    }
}

// Calls f(std::integral_constant<int, K>{}) with the K among Ks that equals k, else
// with K = 0 (any number of taps): the kernels unroll their tap loop for common counts.
template <int... Ks, class F>
void with_taps(int k, F&& f) {
  if (!((k == Ks ? (f(std::integral_constant<int, Ks>{}), true) : false) || ...))
    f(std::integral_constant<int, 0>{});
}

// ---- AVX2: 8 values per vector, 16 pixels per step ----

// The vertical filter at 8 values from `off`: rows[0] * w[0] + rows[1] * w[1] + ...
template <int K>
__attribute__((target("avx2"), always_inline)) inline __m256 vsum8(const float* const* rows,
                                                                   const float* w, int k,
                                                                   size_t off) {
  if constexpr (K > 0) k = K;
  __m256 a = _mm256_mul_ps(_mm256_loadu_ps(rows[0] + off), _mm256_set1_ps(w[0]));
  for (int j = 1; j < k; ++j)
    a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(rows[j] + off), _mm256_set1_ps(w[j])));
  return a;
}

// round_u8 on 8 lanes, as int32: + 0.5, clamped to [0, 255], truncated.
__attribute__((target("avx2"), always_inline)) inline __m256i round8(__m256 v) {
  v = _mm256_add_ps(v, _mm256_set1_ps(0.5f));
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
  return _mm256_cvttps_epi32(v);
}

// 16 values from `off` of the filtered plane, rounded, as bytes.
template <int K>
__attribute__((target("avx2"), always_inline)) inline __m128i bytes16_avx2(const float* const* rows,
                                                                           const float* w, int k,
                                                                           size_t off) {
  const __m256i lo = round8(vsum8<K>(rows, w, k, off));
  const __m256i hi = round8(vsum8<K>(rows, w, k, off + 8));
  // packs works within 128-bit lanes: lo 0-3, hi 0-3 | lo 4-7, hi 4-7; put them in order.
  const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
  return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

template <int K>
__attribute__((target("avx2"))) void vfilter_u8_avx2_k(const float* const* rows, const float* w,
                                                       int k, int n, int channels, uint8_t* out) {
  int o = 0;
  if (channels == 3) {
    const Masks m = load_masks();
    const size_t g = n, b = 2 * static_cast<size_t>(n);
    for (; o + 16 <= n; o += 16)
      store_rgb16(m, bytes16_avx2<K>(rows, w, k, o), bytes16_avx2<K>(rows, w, k, g + o),
                  bytes16_avx2<K>(rows, w, k, b + o), out + 3 * static_cast<size_t>(o));
  } else {
    for (; o + 16 <= n; o += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + o), bytes16_avx2<K>(rows, w, k, o));
  }
  vfilter_u8_from(o, rows, w, k, n, channels, out);
}

// ---- AVX-512: 16 values per vector, 16 pixels per step ----

#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC warning (clang, in the fuzz build, has no such group)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's own AVX-512 headers
#endif
template <int K>
__attribute__((target("avx512f"), always_inline)) inline __m128i bytes16_avx512(
    const float* const* rows, const float* w, int k, size_t off) {
  if constexpr (K > 0) k = K;
  __m512 a = _mm512_mul_ps(_mm512_loadu_ps(rows[0] + off), _mm512_set1_ps(w[0]));
  for (int j = 1; j < k; ++j)
    a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_loadu_ps(rows[j] + off), _mm512_set1_ps(w[j])));
  a = _mm512_add_ps(a, _mm512_set1_ps(0.5f));
  a = _mm512_min_ps(_mm512_max_ps(a, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
  return _mm512_cvtusepi32_epi8(_mm512_cvttps_epi32(a));  // 0-255 already: no saturation
}

template <int K>
__attribute__((target("avx512f"))) void vfilter_u8_avx512_k(const float* const* rows,
                                                            const float* w, int k, int n,
                                                            int channels, uint8_t* out) {
  int o = 0;
  if (channels == 3) {
    const Masks m = load_masks();
    const size_t g = n, b = 2 * static_cast<size_t>(n);
    for (; o + 16 <= n; o += 16)
      store_rgb16(m, bytes16_avx512<K>(rows, w, k, o), bytes16_avx512<K>(rows, w, k, g + o),
                  bytes16_avx512<K>(rows, w, k, b + o), out + 3 * static_cast<size_t>(o));
  } else {
    for (; o + 16 <= n; o += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + o), bytes16_avx512<K>(rows, w, k, o));
  }
  vfilter_u8_from(o, rows, w, k, n, channels, out);
}
#pragma GCC diagnostic pop

}  // namespace

void vfilter_u8_avx2(const float* const* rows, const float* w, int k, int n, int channels,
                     uint8_t* out) {
  with_taps<1, 2, 3, 4>(
      k, [&](auto K) { vfilter_u8_avx2_k<decltype(K)::value>(rows, w, k, n, channels, out); });
}

void vfilter_u8_avx512(const float* const* rows, const float* w, int k, int n, int channels,
                       uint8_t* out) {
  with_taps<1, 2, 3, 4>(
      k, [&](auto K) { vfilter_u8_avx512_k<decltype(K)::value>(rows, w, k, n, channels, out); });
}
#endif

}  // namespace dataecho::detail
