// Internal: the separable resampling kernel behind resize, crops, flip and normalize.
// A Taps table says, for each output column (or row), which consecutive source pixels
// it reads and with what weights; crops, flips and windows are all just tables, so one
// pass over the pixels does all of them.
#pragma once

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
