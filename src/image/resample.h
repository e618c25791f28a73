// Internal: the separable resampling kernel behind resize, crops, flip and normalize.
// A Taps table says, for each output column (or row), which consecutive source pixels
// it reads and with what weights; crops, flips and windows are all just tables, so one
// pass over the pixels does all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "dataecho/image/transforms.h"

namespace dataecho::detail {

struct Taps {
  int count = 0;              // output samples
  int k = 0;                  // taps per sample (shorter rows padded with zero weights)
  std::vector<int> start;     // absolute source index of each sample's first tap
  std::vector<float> weight;  // count * k
  int lo = 0, hi = 0;         // source indices read: [lo, hi)
};

// Samples the source interval [in_lo, in_lo + in_len) at `out_full` evenly spaced
// points (pixel centres), keeping samples [win_lo, win_lo + win_len) of them, in
// reverse order when `reverse`. Triangle filter, widened when downscaling if `antialias`.
// Written into `t`, whose storage is reused (no allocation per image once warm).
void make_taps(Taps& t, int in_lo, int in_len, int out_full, int win_lo, int win_len,
               bool antialias, bool reverse);
// Identity on [lo, lo + len), optionally reversed.
void identity_taps(Taps& t, int lo, int len, bool reverse);
inline Taps identity_taps(int lo, int len, bool reverse) {
  Taps t;
  identity_taps(t, lo, len, reverse);
  return t;
}

// The horizontal filter's implementations: kWindow512 and kWideWindow512 (AVX-512
// permutes within a 32- or 64-value window), kNarrowWindow and kWindow (AVX2 permutes
// within an 8- or 16-value window), kGather (AVX2 gathers) and kScalar give the same
// bits; kBest picks per image.
enum class HFilterKernel {
  kBest,
  kWindow512,
  kWideWindow512,
  kNarrowWindow,
  kWindow,
  kGather,
  kScalar
};
// For tests: use `kernel` wherever it applies (a window kernel falls back to the next
// one where a group does not fit its window; without AVX2 everything is kScalar).
// kScalar also turns off the AVX-512 vertical filter. Not thread-safe.
void force_hfilter_kernel(HFilterKernel kernel);

// How the AVX-512 vertical filter writes a float output: kBest streams outputs of 256
// KiB or more past the cache (non-temporal stores, see resize.cc), kCached never,
// kStreaming whatever the size. All give the same bits. For tests and image_bench; not
// thread-safe.
enum class StoreMode { kBest, kCached, kStreaming };
void force_store_mode(StoreMode mode);

// The vertical filter's implementations: kAvx512 and kAvx2 (vector kernels that, for a
// uint8 output of 1 or 3 channels, also round, clamp and interleave the channels in
// registers) and kScalar (for uint8: the plain vertical loop into a float row, then
// round_u8 per value) give the same bits; kBest takes AVX-512 where the CPU has it.
// A float output takes kAvx512's kernel or else the plain one (compiled for AVX2 where
// the CPU has it). For tests and benchmarks: use `kernel` where the CPU has it (else
// the next one down); force_hfilter_kernel(kScalar) also means kScalar here. Not
// thread-safe.
enum class VFilterKernel { kBest, kAvx512, kAvx2, kScalar };
void force_vfilter_kernel(VFilterKernel kernel);

// A uint8 output value from the filter's sum: rounded half up, clamped to [0, 255].
inline uint8_t round_u8(float v) {
  v += 0.5f;
  return static_cast<uint8_t>(v <= 0.0f ? 0.0f : (v >= 255.0f ? 255.0f : v));
}

// The uint8 output's vertical pass over one output row: rows[j] (j < k) are the
// horizontally filtered source rows, channel-planar (channel c's n values at
// rows[j] + c * n), w the k weights; out gets n pixels of `channels` interleaved
// channels, each round_u8(sum_j w[j] * rows[j][c * n + o]) summed in order of j.
// `kernel` as above (kBest: the widest the CPU has); kScalar, and every kernel for
// channel counts other than 1 and 3, fill `acc` (room for channels * n floats) first.
void vfilter_u8_row(VFilterKernel kernel, const float* const* rows, const float* w, int k, int n,
                    int channels, float* acc, uint8_t* out);

// The vector kernels of vfilter_u8_row (resample_u8.cc), for 1 or 3 channels, on a CPU
// with AVX2 (AVX-512F for the second).
void vfilter_u8_avx2(const float* const* rows, const float* w, int k, int n, int channels,
                     uint8_t* out);
void vfilter_u8_avx512(const float* const* rows, const float* w, int k, int n, int channels,
                       uint8_t* out);

// Where resample reads source rows: row(ctx, y) is source row y from column origin_x
// on. resample asks for each row it needs once, in increasing order, so a source can
// produce rows as they are asked for (a JPEG decoded a few rows at a time).
struct RowSource {
  const uint8_t* (*row)(void* ctx, int y) = nullptr;
  void* ctx = nullptr;
  int channels = 0;
  int origin_x = 0;
};

// Output: uint8 HWC (scale == nullptr) or float32 CHW with out = acc * scale[c] + bias[c].
// Taps hold absolute source indices.
Tensor resample(const RowSource& src, const Taps& ty, const Taps& tx, const float* scale,
                const float* bias);
// The rows of an image in memory (which must outlive the RowSource).
RowSource row_source(const ImageView& v);
// resample over an image in memory.
Tensor resample(const ImageView& src, const Taps& ty, const Taps& tx, const float* scale,
                const float* bias);

}  // namespace dataecho::detail
