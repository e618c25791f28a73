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
Taps make_taps(int in_lo, int in_len, int out_full, int win_lo, int win_len, bool antialias,
               bool reverse);
// Identity on [lo, lo + len), optionally reversed.
Taps identity_taps(int lo, int len, bool reverse);

// The horizontal filter's implementations: kNarrowWindow and kWindow (AVX2 permutes
// within an 8- or 16-value window), kGather (AVX2 gathers) and kScalar give the same
// bits; kBest picks per image.
enum class HFilterKernel { kBest, kNarrowWindow, kWindow, kGather, kScalar };
// For tests: use `kernel` wherever it applies (a window kernel falls back to the next
// one where a group does not fit its window; without AVX2 everything is kScalar).
// Not thread-safe.
void force_hfilter_kernel(HFilterKernel kernel);

// Output: uint8 HWC (scale == nullptr) or float32 CHW with out = acc * scale[c] + bias[c].
// `src` points at source pixel (origin_y, origin_x); taps hold absolute indices.
Tensor resample(const ImageView& src, int origin_y, int origin_x, const Taps& ty, const Taps& tx,
                const float* scale, const float* bias);

}  // namespace dataecho::detail
