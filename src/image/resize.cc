// The separable resampling kernel (see resample.h) and resize(): the SIMD kernels and
// the row loop that runs them. The taps they apply are planned in resample_taps.cc.
// Why this file is long: the kernels (plain, AVX2 by function multiversioning, AVX-512)
// share file-local inline helpers with the row loop that calls them per row, and all of
// them are compiled with -ffp-contract=off so that every kernel gives the same bits.
//
// Work per output image: a horizontal pass over each source row the vertical filter
// needs (computed once, kept in a ring of k rows), then a vertical pass per output row
// that also applies the normalization and writes the output layout. Both passes run on
// float rows laid out channel-planar, so the vertical pass and the CHW store are plain
// vector loops. The uint8 output's vertical pass, which also rounds and interleaves the
// channels, has its vector kernels in resample_u8.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "image/resample.h"

namespace dataecho {
namespace detail {

namespace {

// The kernels below are compiled twice, for AVX2 and for the baseline ISA, and the
// loader picks one (GCC function multiversioning). Floating-point contraction is off
// for this file (CMakeLists.txt), so both give the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define DATAECHO_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DATAECHO_CLONES
#endif

// Float outputs of at least this size are written with non-temporal stores (see
// vfilter_planes_avx512). Smaller ones are likely still in the cache when their consumer
// reads them, and are written through it.
constexpr size_t kStreamOutputBytes = size_t{256} << 10;

// While streaming, each plane's page kLookaheadBytes ahead of the row being written is
// touched with a prefetch, once per page, so that its address translation is ready
// when the stores get there. A batch of 128 224x224 images is 77 MB, far beyond what
// the TLB covers at 4 KiB (in a VM the host's pages count too, whatever the guest
// maps), so every 4 KiB of output started with a page walk that the non-temporal
// stores waited for. Measured on the AMD Zen 4 VM with dataloader_bench's JPEG pipeline
// (batches of 128), the same build with and without, alternating: 0 threads +8-10%
// (median of 8 pairs), 1 thread +5-7%, 2 threads +3-8%. Batches of 4 (2.4 MB) had run
// 7-12% faster than batches of 128 without it. 16, 32 and 64 rows ahead measured the
// same, one prefetch per row the same as one per page. The prefetched line is read
// once (64 bytes per 4 KiB).
constexpr size_t kLookaheadBytes = size_t{16} << 10;
constexpr size_t kPageBytes = 4096;

// The look-ahead prefetches before row `oy` of a [C, OH, OW] float output is written:
// in each plane, the pages that start in (at - row, at], where `at` is kLookaheadBytes
// past the row (the first row: every page up to its `at`).
#if defined(__x86_64__) && defined(__GNUC__)
void prefetch_ahead(const std::byte* out, int C, int OH, int OW, int oy) {
  // Through asm: GCC takes a function that only prefetches for one without effects and
  // drops its calls.
  auto touch = [](uintptr_t a) { asm volatile("prefetcht2 (%0)" : : "r"(a)); };
  const size_t row = static_cast<size_t>(OW) * sizeof(float);
  const size_t plane = row * static_cast<size_t>(OH);
  const size_t at = std::min(static_cast<size_t>(oy) * row + kLookaheadBytes, plane - 1);
  const size_t after =
      oy == 0 ? 0 : std::min(at, static_cast<size_t>(oy) * row + kLookaheadBytes - row);
  for (int c = 0; c < C; ++c) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(out) + static_cast<size_t>(c) * plane;
    if (oy == 0) touch(base);
    for (uintptr_t page = ((base + after) / kPageBytes + 1) * kPageBytes; page <= base + at;
         page += kPageBytes)
      touch(page);
  }
}
#endif

// 8-float vectors in static inline helpers; the ABI note about passing them without AVX
// is moot (nothing crosses a library boundary).
#pragma GCC diagnostic ignored "-Wpsabi"
using v8sf = float __attribute__((vector_size(32)));

inline v8sf load8(const float* p) {
  v8sf v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store8(float* p, v8sf v) { std::memcpy(p, &v, sizeof(v)); }

// Columns [0, n) of an interleaved uint8 row with `channels` channels into `channels`
// float planes, `plane_stride` values apart.
DATAECHO_CLONES
void deinterleave(const uint8_t* row, int channels, int n, int plane_stride, float* planes) {
  if (channels == 3) {
    float* p0 = planes;
    float* p1 = planes + plane_stride;
    float* p2 = planes + 2 * plane_stride;
    for (int i = 0; i < n; ++i) {
      p0[i] = row[3 * i];
      p1[i] = row[3 * i + 1];
      p2[i] = row[3 * i + 2];
    }
    return;
  }
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < n; ++i) planes[c * plane_stride + i] = row[i * channels + c];
}

#if defined(__x86_64__) && defined(__GNUC__)
// deinterleave for 1 and 3 channels, 8 pixels at a time: byte shuffles pick each
// channel's 8 bytes out of the pixels' 24, then widen to floats. The compiler's own
// vectorization of the strided loop above is several times slower.
__attribute__((target("avx2"))) void deinterleave_avx2(const uint8_t* row, int channels, int n,
                                                       int plane_stride, float* planes) {
  int i = 0;
  if (channels == 1) {
    for (; i + 8 <= n; i += 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i));
      _mm256_storeu_ps(planes + i, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)));
    }
  } else if (channels == 3) {
    // Pixels 0-4 come from bytes 0-15 (a), pixels 5-7 from bytes 8-23 (b); -1 gives 0.
    const __m128i sa[3] = {
        _mm_setr_epi8(0, 3, 6, 9, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)};
    const __m128i sb[3] = {
        _mm_setr_epi8(-1, -1, -1, -1, -1, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(-1, -1, -1, -1, -1, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(-1, -1, -1, -1, -1, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1)};
    for (; i + 8 <= n; i += 8) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 3 * i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 3 * i + 8));
      for (int c = 0; c < 3; ++c) {
        const __m128i bytes = _mm_or_si128(_mm_shuffle_epi8(a, sa[c]), _mm_shuffle_epi8(b, sb[c]));
        _mm256_storeu_ps(planes + c * plane_stride + i,
                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
      }
    }
  }
  for (; i < n; ++i)
    for (int c = 0; c < channels; ++c) planes[c * plane_stride + i] = row[i * channels + c];
}
#endif

// Outputs [o, n) of the horizontal filter, one at a time (any k; the SIMD kernels'
// remainder).
inline void hfilter_from(int o, const float* plane, const int* start, const float* w, int k, int n,
                         float* out) {
  for (; o < n; ++o) {
    const float* p = plane + start[o];
    float acc = p[0] * w[o];
    for (int j = 1; j < k; ++j) acc += p[j] * w[j * n + o];
    out[o] = acc;
  }
}

// out[o] = sum_j w[j * n + o] * plane[start[o] + j]: the horizontal filter on one plane.
// Weights are tap-major, so each tap's weights are contiguous.
void hfilter(const float* plane, const int* start, const float* w, int k, int n, float* out) {
  if (k == 1) {
    for (int o = 0; o < n; ++o) out[o] = plane[start[o]] * w[o];
  } else if (k == 2) {
    const float* w1 = w + n;
    for (int o = 0; o < n; ++o) {
      const float* p = plane + start[o];
      out[o] = p[0] * w[o] + p[1] * w1[o];
    }
  } else if (k == 3) {
    const float* w1 = w + n;
    const float* w2 = w + 2 * n;
    for (int o = 0; o < n; ++o) {
      const float* p = plane + start[o];
      out[o] = p[0] * w[o] + p[1] * w1[o] + p[2] * w2[o];
    }
  } else {
    hfilter_from(0, plane, start, w, k, n, out);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The horizontal filter with AVX2 gathers, 8 outputs at a time, any number of taps; the
// same operations in the same order as hfilter, so the same bits. (Until ecbf829, 2026-12-01, it
// took only 1-3 taps and ran the scalar loop for more: downscaling past about 1.5x, most
// random resized crops of a photo larger than the output. perf put that loop at 12% of
// the photo pipeline's time; with gathers it is 2-3%.)
__attribute__((target("avx2"))) void hfilter_avx2(const float* plane, const int* start,
                                                  const float* w, int k, int n, float* out) {
  int o = 0;
  for (; o + 8 <= n; o += 8) {
    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(start + o));
    __m256 a = _mm256_mul_ps(_mm256_i32gather_ps(plane, idx, 4), _mm256_loadu_ps(w + o));
    for (int j = 1; j < k; ++j)
      a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_i32gather_ps(plane + j, idx, 4),
                                         _mm256_loadu_ps(w + static_cast<size_t>(j) * n + o)));
    _mm256_storeu_ps(out + o, a);
  }
  hfilter_from(o, plane, start, w, k, n, out);
}

// The gather-free horizontal filter. Outputs go in groups of 8; a group's taps all lie
// in a window of 16 consecutive source values starting at base[g], and idx holds each
// output's first tap relative to that window. Two permutes and a blend pick 8 values
// out of the window per tap: on AMD Zen a gather of 8 floats costs several times that.
// The same operations in the same order as hfilter, so the same bits.
// K > 0: that many taps, known at compile time (the loop unrolls); K == 0: k taps.
// kNarrow: every group's taps fit in 8 values (upscaling by 8/7 or more, the usual
// random resized crop), so one permute per tap does, without the second and the blend.
template <int K, bool kNarrow>
__attribute__((target("avx2"))) void hfilter_window_avx2(const float* plane, const int* start,
                                                         const int* base, const int* idx,
                                                         const float* w, int k, int n, float* out) {
  if constexpr (K > 0) k = K;
  const __m256i one = _mm256_set1_epi32(1);
  int o = 0;
  for (int g = 0; o + 8 <= n; o += 8, ++g) {
    const float* p = plane + base[g];
    const __m256 lo = _mm256_loadu_ps(p);
    const __m256 hi = kNarrow ? lo : _mm256_loadu_ps(p + 8);
    __m256i ix = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + 8 * g));
    __m256 a = _mm256_setzero_ps();
    for (int j = 0; j < k; ++j) {
      // permutevar8x32 uses the low 3 bits of each index; bit 3 (moved to the sign bit)
      // chooses the upper half of the window.
      const __m256 v = kNarrow ? _mm256_permutevar8x32_ps(lo, ix)
                               : _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, ix),
                                                  _mm256_permutevar8x32_ps(hi, ix),
                                                  _mm256_castsi256_ps(_mm256_slli_epi32(ix, 28)));
      const __m256 t = _mm256_mul_ps(v, _mm256_loadu_ps(w + static_cast<size_t>(j) * n + o));
      a = j == 0 ? t : _mm256_add_ps(a, t);
      ix = _mm256_add_epi32(ix, one);
    }
    _mm256_storeu_ps(out + o, a);
  }
  hfilter_from(o, plane, start, w, k, n, out);
}

// Calls f(std::integral_constant<int, K>{}) with the K among Ks that equals k, else
// with K = 0 (a kernel's any-number-of-taps instance): the kernels unroll their tap
// loop for the counts that are common where each applies.
template <int... Ks, class F>
void with_taps(int k, F&& f) {
  if (!((k == Ks ? (f(std::integral_constant<int, Ks>{}), true) : false) || ...))
    f(std::integral_constant<int, 0>{});
}

template <bool kNarrow>
void hfilter_window(const float* plane, const int* start, const int* base, const int* idx,
                    const float* w, int k, int n, float* out) {
  with_taps<1, 2, 3>(k, [&](auto K) {
    hfilter_window_avx2<decltype(K)::value, kNarrow>(plane, start, base, idx, w, k, n, out);
  });
}

// The windowed filter with AVX-512: groups of 16 outputs whose taps all lie in a window
// of 32 consecutive source values (base[g], idx as above with 16 per group); one
// two-source permute picks a tap's 16 values. It fits downscaling up to about 1.85x;
// the AVX2 window fits up to about 1.75x and comes first (choose_hfilter), so this one
// takes the band between, which went to the gathers. The same operations in the same
// order as hfilter, so the same bits.
template <int K>
__attribute__((target("avx512f"))) void hfilter_window_avx512(const float* plane, const int* start,
                                                              const int* base, const int* idx,
                                                              const float* w, int k, int n,
                                                              float* out) {
  if constexpr (K > 0) k = K;
  const __m512i one = _mm512_set1_epi32(1);
  int o = 0;
  for (int g = 0; o + 16 <= n; o += 16, ++g) {
    const float* p = plane + base[g];
    const __m512 lo = _mm512_loadu_ps(p);
    const __m512 hi = _mm512_loadu_ps(p + 16);
    __m512i ix = _mm512_loadu_si512(idx + 16 * g);
    __m512 a = _mm512_mul_ps(_mm512_permutex2var_ps(lo, ix, hi), _mm512_loadu_ps(w + o));
    for (int j = 1; j < k; ++j) {
      ix = _mm512_add_epi32(ix, one);
      a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_permutex2var_ps(lo, ix, hi),
                                         _mm512_loadu_ps(w + static_cast<size_t>(j) * n + o)));
    }
    _mm512_storeu_ps(out + o, a);
  }
  hfilter_from(o, plane, start, w, k, n, out);
}

// The AVX-512 window widened to 64 values: a tap's 16 values come from two two-source
// permutes (the window's lower and upper 32 values) and a blend on bit 5 of the index.
// It fits downscaling up to about 3.5x, most of what went to the gathers (random
// resized crops of photos up to 2.5x wider than the output: AMD Zen 4 gathers 8 floats
// several times slower than this). The same operations in the same order as hfilter,
// so the same bits.
// Value ix (0-63) of the window v0..v3 in each lane.
__attribute__((target("avx512f"), always_inline)) inline __m512 pick64(__m512 v0, __m512 v1,
                                                                       __m512 v2, __m512 v3,
                                                                       __m512i ix) {
  return _mm512_mask_blend_ps(_mm512_test_epi32_mask(ix, _mm512_set1_epi32(32)),
                              _mm512_permutex2var_ps(v0, ix, v1),
                              _mm512_permutex2var_ps(v2, ix, v3));
}

template <int K>
__attribute__((target("avx512f"))) void hfilter_window64_avx512(const float* plane,
                                                                const int* start, const int* base,
                                                                const int* idx, const float* w,
                                                                int k, int n, float* out) {
  if constexpr (K > 0) k = K;
  const __m512i one = _mm512_set1_epi32(1);
  int o = 0;
  for (int g = 0; o + 16 <= n; o += 16, ++g) {
    const float* p = plane + base[g];
    const __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
    const __m512 v2 = _mm512_loadu_ps(p + 32), v3 = _mm512_loadu_ps(p + 48);
    __m512i ix = _mm512_loadu_si512(idx + 16 * g);
    __m512 a = _mm512_mul_ps(pick64(v0, v1, v2, v3, ix), _mm512_loadu_ps(w + o));
    for (int j = 1; j < k; ++j) {
      ix = _mm512_add_epi32(ix, one);
      a = _mm512_add_ps(a, _mm512_mul_ps(pick64(v0, v1, v2, v3, ix),
                                         _mm512_loadu_ps(w + static_cast<size_t>(j) * n + o)));
    }
    _mm512_storeu_ps(out + o, a);
  }
  hfilter_from(o, plane, start, w, k, n, out);
}

void hfilter_window64(const float* plane, const int* start, const int* base, const int* idx,
                      const float* w, int k, int n, float* out) {
  with_taps<5, 6, 7>(k, [&](auto K) {
    hfilter_window64_avx512<decltype(K)::value>(plane, start, base, idx, w, k, n, out);
  });
}

void hfilter_window512(const float* plane, const int* start, const int* base, const int* idx,
                       const float* w, int k, int n, float* out) {
  with_taps<2, 3, 4, 5>(k, [&](auto K) {
    hfilter_window_avx512<decltype(K)::value>(plane, start, base, idx, w, k, n, out);
  });
}
#endif

HFilterKernel forced_kernel = HFilterKernel::kBest;
VFilterKernel forced_vkernel = VFilterKernel::kBest;
StoreMode store_mode = StoreMode::kBest;

bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

bool cpu_has_avx512f() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512f = __builtin_cpu_supports("avx512f");
  return avx512f;
#else
  return false;
#endif
}

// out[i] = sum_j w[j] * rows[j][off + i] + bias for i < n.
__attribute__((always_inline)) inline void vfilter_body(const float* const* rows, size_t off,
                                                        const float* w, int k, int n, float bias,
                                                        float* out) {
  int i = 0;
  if (k == 2) {
    const float* r0 = rows[0] + off;
    const float* r1 = rows[1] + off;
    const float w0 = w[0], w1 = w[1];
    for (; i + 8 <= n; i += 8) store8(out + i, load8(r0 + i) * w0 + load8(r1 + i) * w1 + bias);
  } else {
    for (; i + 8 <= n; i += 8) {
      v8sf a = load8(rows[0] + off + i) * w[0];
      for (int j = 1; j < k; ++j) a += load8(rows[j] + off + i) * w[j];
      store8(out + i, a + bias);
    }
  }
  for (; i < n; ++i) {
    float a = rows[0][off + i] * w[0];
    for (int j = 1; j < k; ++j) a += rows[j][off + i] * w[j];
    out[i] = a + bias;
  }
}

DATAECHO_CLONES
void vfilter(const float* const* rows, const float* w, int k, int n, float bias, float* out) {
  vfilter_body(rows, 0, w, k, n, bias, out);
}

// One output row of every channel of the float output: channel c's row is at
// rows[j] + c * n, its weights w[j] * scale[c] (the normalization folded in), and it is
// written at out + c * out_stride. One call per output row, not per row and channel.
// `wc` has room for k weights.
DATAECHO_CLONES
void vfilter_planes(const float* const* rows, const float* w, int k, int n, int channels,
                    const float* scale, const float* bias, float* wc, float* out,
                    size_t out_stride) {
  for (int c = 0; c < channels; ++c) {
    for (int j = 0; j < k; ++j) wc[j] = w[j] * scale[c];
    vfilter_body(rows, static_cast<size_t>(c) * n, wc, k, n, bias[c], out + c * out_stride);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// vfilter_planes with 64-byte stores, any number of taps. The vertical filter is bound
// by writing the output: whole-line stores made decode_augment 1-2% faster on AMD Zen
// (alternating runs). With `stream`, the stores are non-temporal: they go to memory
// without first reading each line into the cache (half the memory traffic) and without
// evicting the source rows and the decoder's working set. A 224x224 float image is 588
// KiB, more than half the L2 of the machines measured, and goes into a batch that the
// consumer reads long after. Measured on AMD Zen with AVX-512: dataloader_bench's JPEG
// pipeline 4% faster (0 threads); image_bench's decode_augment, whose output is dropped
// at once, 1-4 points faster with 1 thread and 1-11 with 2 over four runs (against its
// "cached" row). The caller issues the store fence before the output is published.
// Same operations in the same order as vfilter_body, so the same bits.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC warning (clang, in the fuzz build, has no such group)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's own AVX-512 headers
#endif
// Sixteen outputs of vfilter_body at `off`; `w2` holds w[0] and w[1] broadcast, for
// the usual two taps (loaded once per row, not once per store).
__attribute__((target("avx512f"), always_inline)) inline __m512 vfilter16(
    const float* const* rows, size_t off, const float* w, int k, const __m512* w2, __m512 bias) {
  if (k == 2)
    return _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(rows[0] + off), w2[0]),
                                       _mm512_mul_ps(_mm512_loadu_ps(rows[1] + off), w2[1])),
                         bias);
  __m512 a = _mm512_mul_ps(_mm512_loadu_ps(rows[0] + off), _mm512_set1_ps(w[0]));
  for (int j = 1; j < k; ++j)
    a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_loadu_ps(rows[j] + off), _mm512_set1_ps(w[j])));
  return _mm512_add_ps(a, bias);
}

__attribute__((target("avx512f"))) void vfilter_planes_avx512(
    const float* const* rows, const float* w, int k, int n, int channels, const float* scale,
    const float* bias, float* wc, bool stream, float* out, size_t out_stride) {
  for (int c = 0; c < channels; ++c) {
    for (int j = 0; j < k; ++j) wc[j] = w[j] * scale[c];
    const size_t off = static_cast<size_t>(c) * n;
    float* o = out + c * out_stride;
    const __m512 vb = _mm512_set1_ps(bias[c]);
    const __m512 w2[2] = {_mm512_set1_ps(wc[0]), _mm512_set1_ps(k > 1 ? wc[1] : 0.0f)};
    int i = 0;
    if (stream && (reinterpret_cast<uintptr_t>(o) & 63) == 0)
      for (; i + 16 <= n; i += 16) _mm512_stream_ps(o + i, vfilter16(rows, off + i, wc, k, w2, vb));
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, vfilter16(rows, off + i, wc, k, w2, vb));
    for (; i < n; ++i) {
      float a = rows[0][off + i] * wc[0];
      for (int j = 1; j < k; ++j) a += rows[j][off + i] * wc[j];
      o[i] = a + bias[c];
    }
  }
}
#pragma GCC diagnostic pop
#endif

struct Scratch {
  std::vector<float> planes;  // one source row, deinterleaved: C planes of plane_stride
  std::vector<int> base;      // windowed filter: each group's first source value
  std::vector<int> idx;       // windowed filter: each output's first tap in its window
  std::vector<float> ring;    // ty.k horizontally filtered rows of C * OW floats
  std::vector<float> acc;
  std::vector<float> wx;   // tx weights, tap-major
  std::vector<int> start;  // tx starts relative to tx.lo
  std::vector<int> ring_row;
  std::vector<float> wy;
  std::vector<const float*> rows;
};

// The horizontal kernel for this image's taps: windowed where every group of outputs
// fits its window, gathers where not, plain C++ without AVX2. The AVX2 windows (8
// outputs in 8 or 16 values: upscaling and downscaling up to about 1.75x) come first:
// on AMD Zen 4 an AVX-512 window filter measured slower than them (docs/image.md). The
// AVX-512 window (16 outputs in 32 values) takes downscales of about 1.75-1.85x, which
// went to the gathers. Fills s.base and s.idx.
bool fill_windows(Scratch& s, int n, int k, int group, int window, int* widest) {
  const int groups = n / group;
  s.base.resize(groups);
  s.idx.resize(static_cast<size_t>(groups) * group);
  *widest = 0;
  for (int g = 0; g < groups; ++g) {
    const int* st = s.start.data() + static_cast<ptrdiff_t>(group) * g;
    const int lo = *std::min_element(st, st + group), hi = *std::max_element(st, st + group) + k;
    if (hi - lo > window) return false;
    *widest = std::max(*widest, hi - lo);
    s.base[g] = lo;
    for (int i = 0; i < group; ++i) s.idx[static_cast<size_t>(group) * g + i] = st[i] - lo;
  }
  return true;
}

HFilterKernel choose_hfilter(Scratch& s, int n, int k) {
  if (!cpu_has_avx2()) return HFilterKernel::kScalar;
  if (forced_kernel == HFilterKernel::kScalar || forced_kernel == HFilterKernel::kGather)
    return forced_kernel;
  const bool avx512 = cpu_has_avx512f() && (forced_kernel == HFilterKernel::kBest ||
                                            forced_kernel == HFilterKernel::kWindow512 ||
                                            forced_kernel == HFilterKernel::kWideWindow512);
  int widest = 0;
  if (avx512 && forced_kernel == HFilterKernel::kWindow512 &&
      fill_windows(s, n, k, 16, 32, &widest))
    return HFilterKernel::kWindow512;
  if (avx512 && forced_kernel == HFilterKernel::kWideWindow512 &&
      fill_windows(s, n, k, 16, 64, &widest))
    return HFilterKernel::kWideWindow512;
  if (fill_windows(s, n, k, 8, 16, &widest))
    return widest <= 8 && forced_kernel != HFilterKernel::kWindow ? HFilterKernel::kNarrowWindow
                                                                  : HFilterKernel::kWindow;
  if (avx512 && fill_windows(s, n, k, 16, 32, &widest)) return HFilterKernel::kWindow512;
  if (avx512 && fill_windows(s, n, k, 16, 64, &widest)) return HFilterKernel::kWideWindow512;
  return HFilterKernel::kGather;
}

void hfilter_dispatch(HFilterKernel kernel, const Scratch& s, const float* plane, int k, int n,
                      float* out) {
  switch (kernel) {
#if defined(__x86_64__) && defined(__GNUC__)
    case HFilterKernel::kNarrowWindow:
      return hfilter_window<true>(plane, s.start.data(), s.base.data(), s.idx.data(), s.wx.data(),
                                  k, n, out);
    case HFilterKernel::kWindow:
      return hfilter_window<false>(plane, s.start.data(), s.base.data(), s.idx.data(), s.wx.data(),
                                   k, n, out);
    case HFilterKernel::kWindow512:
      return hfilter_window512(plane, s.start.data(), s.base.data(), s.idx.data(), s.wx.data(), k,
                               n, out);
    case HFilterKernel::kWideWindow512:
      return hfilter_window64(plane, s.start.data(), s.base.data(), s.idx.data(), s.wx.data(), k, n,
                              out);
    case HFilterKernel::kGather:
      return hfilter_avx2(plane, s.start.data(), s.wx.data(), k, n, out);
#endif
    default:
      return hfilter(plane, s.start.data(), s.wx.data(), k, n, out);
  }
}

}  // namespace

void force_hfilter_kernel(HFilterKernel kernel) { forced_kernel = kernel; }
void force_vfilter_kernel(VFilterKernel kernel) { forced_vkernel = kernel; }
void force_store_mode(StoreMode mode) { store_mode = mode; }

void vfilter_u8_row(VFilterKernel kernel, const float* const* rows, const float* w, int k, int n,
                    int channels, float* acc, uint8_t* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (channels == 1 || channels == 3) {
    if (kernel == VFilterKernel::kBest)
      kernel = cpu_has_avx512f() ? VFilterKernel::kAvx512 : VFilterKernel::kAvx2;
    if (kernel == VFilterKernel::kAvx512 && cpu_has_avx512f())
      return vfilter_u8_avx512(rows, w, k, n, channels, out);
    if (kernel != VFilterKernel::kScalar && cpu_has_avx2())
      return vfilter_u8_avx2(rows, w, k, n, channels, out);
  }
#endif
  vfilter(rows, w, k, channels * n, 0.0f, acc);
  for (int c = 0; c < channels; ++c)
    for (int o = 0; o < n; ++o) out[o * channels + c] = round_u8(acc[c * n + o]);
}

namespace {

// The vertical kernel for an image whose horizontal one is `h`: kScalar with it (no
// AVX2, or forced), else AVX-512 where the CPU has it, else AVX2; a forced one where
// the CPU has it.
VFilterKernel choose_vfilter(HFilterKernel h) {
  if (h == HFilterKernel::kScalar || forced_vkernel == VFilterKernel::kScalar)
    return VFilterKernel::kScalar;
  if (cpu_has_avx512f() &&
      (forced_vkernel == VFilterKernel::kBest || forced_vkernel == VFilterKernel::kAvx512))
    return VFilterKernel::kAvx512;
  return VFilterKernel::kAvx2;
}

// One image's plan in the scratch: tx's starts and weights (tap-major), and a ring of
// horizontally filtered rows (source row y in slot y & ring_mask: a power-of-two ring
// of at least ty.k rows holds any ty.k consecutive rows, with no division per row).
struct RowPlan {
  int C = 0, OW = 0, row_len = 0, n_in = 0, plane_stride = 0, ring_mask = 0;
  int64_t col0 = 0;  // the first source byte of a row that tx reads
  HFilterKernel kernel = HFilterKernel::kScalar;
};

RowPlan plan_rows(Scratch& s, const RowSource& src, const Taps& ty, const Taps& tx) {
  RowPlan p;
  p.C = src.channels;
  p.OW = tx.count;
  p.row_len = p.C * p.OW;
  p.n_in = tx.hi - tx.lo;
  // Each plane has room for a whole 64-value window past its end (the windowed filters
  // load whole windows; what they read there is never used).
  p.plane_stride = p.n_in + 64;
  s.planes.assign(static_cast<size_t>(p.C) * p.plane_stride, 0.0f);
  s.start.resize(p.OW);
  s.wx.resize(static_cast<size_t>(tx.k) * p.OW);
  for (int o = 0; o < p.OW; ++o) {
    s.start[o] = tx.start[o] - tx.lo;
    for (int j = 0; j < tx.k; ++j)
      s.wx[static_cast<size_t>(j) * p.OW + o] = tx.weight[static_cast<size_t>(o) * tx.k + j];
  }
  p.kernel = choose_hfilter(s, p.OW, tx.k);
  int ring_rows = 1;
  while (ring_rows < ty.k) ring_rows *= 2;
  p.ring_mask = ring_rows - 1;
  s.ring.resize(static_cast<size_t>(ring_rows) * p.row_len);
  s.ring_row.assign(ring_rows, -1);
  s.acc.resize(p.row_len);
  s.wy.resize(ty.k);
  s.rows.resize(ty.k);
  p.col0 = static_cast<int64_t>(tx.lo - src.origin_x) * p.C;
  return p;
}

// The ty.k horizontally filtered source rows that output row `oy` needs, in s.rows:
// each source row is filtered once and kept in the ring while rows need it.
inline void gather_rows(Scratch& s, const RowPlan& p, const RowSource& src, const Taps& ty, int k,
                        int oy) {
  const int y0 = ty.start[oy];
  for (int j = 0; j < ty.k; ++j) {
    const int y = y0 + j;
    const int slot = y & p.ring_mask;
    float* dst = s.ring.data() + static_cast<size_t>(slot) * p.row_len;
    if (s.ring_row[slot] != y) {
      const uint8_t* row = src.row(src.ctx, y) + p.col0;
#if defined(__x86_64__) && defined(__GNUC__)
      if (p.kernel != HFilterKernel::kScalar)
        deinterleave_avx2(row, p.C, p.n_in, p.plane_stride, s.planes.data());
      else
#endif
        deinterleave(row, p.C, p.n_in, p.plane_stride, s.planes.data());
      for (int c = 0; c < p.C; ++c)
        hfilter_dispatch(p.kernel, s, s.planes.data() + static_cast<size_t>(c) * p.plane_stride, k,
                         p.OW, dst + static_cast<size_t>(c) * p.OW);
      s.ring_row[slot] = y;
    }
    s.rows[j] = dst;
  }
}

}  // namespace

Tensor resample(const RowSource& src, const Taps& ty, const Taps& tx, const float* scale,
                const float* bias) {
  thread_local Scratch scratch;
  Scratch& s = scratch;  // one thread-local lookup, not one per use in the row loop
  const RowPlan p = plan_rows(s, src, ty, tx);
  const int C = p.C, OH = ty.count, OW = p.OW, row_len = p.row_len;
  const bool to_float = scale != nullptr;
  const VFilterKernel vkernel = choose_vfilter(p.kernel);

#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx512 = to_float && vkernel == VFilterKernel::kAvx512;
  const bool stream =
      avx512 && (store_mode == StoreMode::kBest
                     ? static_cast<size_t>(C) * OH * OW * sizeof(float) >= kStreamOutputBytes
                     : store_mode == StoreMode::kStreaming);
#endif
  auto run = [&](std::byte* out_bytes) {
    for (int oy = 0; oy < OH; ++oy) {
      gather_rows(s, p, src, ty, tx.k, oy);
      const float* w = ty.weight.data() + static_cast<size_t>(oy) * ty.k;
      if (to_float) {
        // The normalization folds into the vertical weights: one pass writes the output.
        auto* out = reinterpret_cast<float*>(out_bytes) + static_cast<size_t>(oy) * OW;
#if defined(__x86_64__) && defined(__GNUC__)
        if (stream) prefetch_ahead(out_bytes, C, OH, OW, oy);
        if (avx512)
          vfilter_planes_avx512(s.rows.data(), w, ty.k, OW, C, scale, bias, s.wy.data(), stream,
                                out, static_cast<size_t>(OH) * OW);
        else
#endif
          vfilter_planes(s.rows.data(), w, ty.k, OW, C, scale, bias, s.wy.data(), out,
                         static_cast<size_t>(OH) * OW);
      } else {
        vfilter_u8_row(vkernel, s.rows.data(), w, ty.k, OW, C, s.acc.data(),
                       reinterpret_cast<uint8_t*>(out_bytes) + static_cast<size_t>(oy) * row_len);
      }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (stream) _mm_sfence();  // the streamed lines reach memory before the tensor is shared
#endif
  };
  // Tensor::make takes a std::function: a lambda of one reference fits in it without
  // a heap allocation, the row loop's own closure would not.
  auto fill = [&run](std::byte* out_bytes) { run(out_bytes); };
  if (to_float) return Tensor::make(DType::kFloat32, {C, OH, OW}, fill);
  return Tensor::make(DType::kUInt8, {OH, OW, C}, fill);
}

RowSource row_source(const ImageView& v) {
  RowSource rows;
  rows.row = [](void* ctx, int y) {
    const auto* view = static_cast<const ImageView*>(ctx);
    return view->data + static_cast<int64_t>(y) * view->stride;
  };
  rows.ctx = const_cast<ImageView*>(&v);  // only read through
  rows.channels = v.channels;
  return rows;
}

Tensor resample(const ImageView& src, const Taps& ty, const Taps& tx, const float* scale,
                const float* bias) {
  return resample(row_source(src), ty, tx, scale, bias);
}

}  // namespace detail

Tensor resize(const Tensor& hwc, int height, int width, bool antialias) {
  ImageView v = ImageView::of(hwc, "resize");
  if (height <= 0 || width <= 0)
    throw_error(
        ErrorCode::kInvalidArgument, "resize",
        "size must be positive, got " + std::to_string(height) + "x" + std::to_string(width));
  detail::Taps ty, tx;
  detail::make_taps(ty, 0, v.height, height, 0, height, antialias, false);
  detail::make_taps(tx, 0, v.width, width, 0, width, antialias, false);
  return detail::resample(v, ty, tx, nullptr, nullptr);
}

}  // namespace dataecho
