// The "same work by hand" reference of bench/dataloader_compare.sh:
// what dataecho's fused decode_augment does to a JPEG, done the obvious way on a fully
// decoded image. dataecho decodes only the crop region (and may let the decoder scale it
// down); this reference decodes every pixel, then crops, resizes, flips and normalizes
// in plain loops:
//   - random resized crop with torchvision's recipe (10 attempts at an area in
//     [0.08, 1] of the image and an aspect ratio in [3/4, 4/3], log-uniform; otherwise
//     the centre crop at the nearest allowed ratio);
//   - a separable resize of the crop to size x size with a triangle (bilinear) filter on
//     pixel centres, widened to the scale when shrinking (antialiased, as PIL's and
//     dataecho's);
//   - a horizontal flip with probability 0.5;
//   - x / 255, then (x - mean) / std per channel (ImageNet's), into float32 CHW.
// Header-only, for the one benchmark that uses it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace bench {

// For each output index: the first input index and the normalized weights from there.
struct FilterTaps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // count[o] weights from o * stride
  int stride = 0;
};

// Taps to resample [start, start + in) of an axis to `out` samples.
inline FilterTaps triangle_taps(int start, int in, int out) {
  FilterTaps t;
  const double scale = static_cast<double>(in) / out;
  const double support = std::max(1.0, scale);  // the filter's half-width in input pixels
  t.stride = static_cast<int>(std::ceil(support)) * 2 + 2;
  t.first.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.weights.assign(static_cast<size_t>(out) * static_cast<size_t>(t.stride), 0.0f);
  for (int o = 0; o < out; ++o) {
    const double centre = (o + 0.5) * scale;
    const int lo = std::max(0, static_cast<int>(std::floor(centre - support)));
    const int hi = std::min(in, static_cast<int>(std::ceil(centre + support)));
    double total = 0;
    int n = 0;
    float* w = &t.weights[static_cast<size_t>(o) * static_cast<size_t>(t.stride)];
    for (int i = lo; i < hi && n < t.stride; ++i, ++n) {
      const double x = std::abs((i + 0.5 - centre) / support);
      w[n] = static_cast<float>(x < 1 ? 1 - x : 0);
      total += w[n];
    }
    for (int k = 0; k < n; ++k) w[k] = total > 0 ? static_cast<float>(w[k] / total) : 0.0f;
    t.first[static_cast<size_t>(o)] = start + lo;
    t.count[static_cast<size_t>(o)] = n;
  }
  return t;
}

struct Crop {
  int x = 0, y = 0, w = 0, h = 0;
};

inline Crop random_resized_crop(int width, int height, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + 0.92 * u(rng));
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * u(rng));
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int x = static_cast<int>(u(rng) * (width - w + 1));
      const int y = static_cast<int>(u(rng) * (height - h + 1));
      return {std::min(x, width - w), std::min(y, height - h), w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0)
    h = static_cast<int>(std::lround(w / (3.0 / 4.0)));
  else if (in_ratio > 4.0 / 3.0)
    w = static_cast<int>(std::lround(h * (4.0 / 3.0)));
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// Per-thread scratch, reused from image to image.
struct HandScratch {
  std::vector<float> rows;  // the crop's rows resized horizontally: crop.h x size x 3
};

// `rgb`: width x height x 3 (fully decoded). `out`: 3 x size x size floats.
inline void augment_by_hand(const uint8_t* rgb, int width, int height, int size,
                            std::mt19937_64& rng, HandScratch& scratch, float* out) {
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  const Crop c = random_resized_crop(width, height, rng);
  const bool flip = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
  const FilterTaps tx = triangle_taps(c.x, c.w, size);
  const FilterTaps ty = triangle_taps(c.y, c.h, size);
  // Horizontal pass: every row of the crop to `size` pixels (flipped here if asked).
  scratch.rows.resize(static_cast<size_t>(c.h) * static_cast<size_t>(size) * 3);
  for (int r = 0; r < c.h; ++r) {
    const uint8_t* row = rgb + (static_cast<size_t>(c.y + r) * static_cast<size_t>(width)) * 3;
    float* dst = &scratch.rows[static_cast<size_t>(r) * static_cast<size_t>(size) * 3];
    for (int o = 0; o < size; ++o) {
      const float* w = &tx.weights[static_cast<size_t>(o) * static_cast<size_t>(tx.stride)];
      const uint8_t* p = row + static_cast<size_t>(tx.first[static_cast<size_t>(o)]) * 3;
      float s0 = 0, s1 = 0, s2 = 0;
      for (int k = 0; k < tx.count[static_cast<size_t>(o)]; ++k, p += 3) {
        s0 += w[k] * p[0];
        s1 += w[k] * p[1];
        s2 += w[k] * p[2];
      }
      float* d = dst + static_cast<size_t>(flip ? size - 1 - o : o) * 3;
      d[0] = s0;
      d[1] = s1;
      d[2] = s2;
    }
  }
  // Vertical pass, then normalize into CHW.
  const size_t plane = static_cast<size_t>(size) * static_cast<size_t>(size);
  for (int o = 0; o < size; ++o) {
    const float* w = &ty.weights[static_cast<size_t>(o) * static_cast<size_t>(ty.stride)];
    const int first = ty.first[static_cast<size_t>(o)] - c.y;
    for (int x = 0; x < size; ++x) {
      float s[3] = {0, 0, 0};
      for (int k = 0; k < ty.count[static_cast<size_t>(o)]; ++k) {
        const float* p =
            &scratch.rows[(static_cast<size_t>(first + k) * static_cast<size_t>(size) + x) * 3];
        s[0] += w[k] * p[0];
        s[1] += w[k] * p[1];
        s[2] += w[k] * p[2];
      }
      for (int ch = 0; ch < 3; ++ch)
        out[ch * plane + static_cast<size_t>(o) * size + x] =
            (s[ch] / 255.0f - kMean[ch]) / kStd[ch];
    }
  }
}

}  // namespace bench
