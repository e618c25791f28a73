// Synthetic test images for the image tests (and the seeds of fuzz/image_decode_fuzz.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "dataecho/core/rng.h"
#include "dataecho/core/tensor.h"

namespace dataecho::testing {

// A smooth, natural-ish picture (gradients, blobs and a little noise): what a JPEG
// encoder is made for, so that PSNR figures mean something.
inline Tensor synthetic_image(int height, int width, int channels, uint64_t seed = 1) {
  Rng rng(seed);
  const double fx = 1 + rng.uniform01() * 3, fy = 1 + rng.uniform01() * 3;
  return Tensor::make(DType::kUInt8, {height, width, channels}, [&](std::byte* b) {
    auto* p = reinterpret_cast<uint8_t*>(b);
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < channels; ++c) {
          double u = static_cast<double>(x) / width, v = static_cast<double>(y) / height;
          double val = 128 + 60 * std::sin(6.28 * fx * u + c) * std::cos(6.28 * fy * v - c) +
                       40 * (u - v) + 8 * (rng.uniform01() - 0.5);
          *p++ = static_cast<uint8_t>(std::clamp(val, 0.0, 255.0));
        }
  });
}

// Each pixel holds a distinct, position-revealing value: channel c of (y, x) is
// (y * 16 + x * 3 + c * 7) mod 256 (the caller keeps images small enough to tell).
inline Tensor coordinate_image(int height, int width, int channels) {
  return Tensor::make(DType::kUInt8, {height, width, channels}, [&](std::byte* b) {
    auto* p = reinterpret_cast<uint8_t*>(b);
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < channels; ++c)
          *p++ = static_cast<uint8_t>((y * 16 + x * 3 + c * 7) & 255);
  });
}

inline uint8_t at(const Tensor& hwc, int y, int x, int c) {
  const auto& s = hwc.shape();
  return hwc.data<uint8_t>()[(static_cast<int64_t>(y) * s[1] + x) * s[2] + c];
}

inline double psnr(const Tensor& a, const Tensor& b) {
  double se = 0;
  const uint8_t* pa = a.data<uint8_t>();
  const uint8_t* pb = b.data<uint8_t>();
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double d = static_cast<double>(pa[i]) - pb[i];
    se += d * d;
  }
  double mse = se / static_cast<double>(a.num_elements());
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

}  // namespace dataecho::testing
