// Transforms against hand-computed values and a naive reference, and the augmentation's
// randomness contract: reproducible per (seed, id, echo), different across echoes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "dataecho/image/codec.h"
#include "dataecho/image/transforms.h"
#include "dataecho/spec/registry.h"
#include "image/resample.h"
#include "image_test_util.h"
#include "test_util.h"

namespace dataecho {
namespace {

using testing::at;
using testing::coordinate_image;
using testing::error_of;
using testing::psnr;
using testing::synthetic_image;

// ---- resize ----

// The 1-D weights of PIL's bilinear filter, written out directly.
std::vector<double> weights_1d(int in, int out, int o, bool antialias) {
  double scale = static_cast<double>(in) / out;
  double support = antialias && scale > 1 ? scale : 1.0;
  double center = (o + 0.5) * scale;
  std::vector<double> w(in, 0.0);
  double total = 0;
  for (int i = 0; i < in; ++i) {
    double d = std::abs(i + 0.5 - center) / support;
    if (d < 1) w[i] = 1 - d, total += w[i];
  }
  for (double& v : w) v /= total;
  return w;
}

// A direct 2-D sum over every source pixel: no tables, no separable passes.
Tensor naive_resize(const Tensor& img, int oh, int ow, bool antialias) {
  const int h = static_cast<int>(img.shape()[0]), w = static_cast<int>(img.shape()[1]);
  const int c = static_cast<int>(img.shape()[2]);
  return Tensor::make(DType::kUInt8, {oh, ow, c}, [&](std::byte* b) {
    auto* p = reinterpret_cast<uint8_t*>(b);
    for (int oy = 0; oy < oh; ++oy) {
      auto wy = weights_1d(h, oh, oy, antialias);
      for (int ox = 0; ox < ow; ++ox) {
        auto wx = weights_1d(w, ow, ox, antialias);
        for (int ch = 0; ch < c; ++ch) {
          double acc = 0;
          for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) acc += wy[y] * wx[x] * at(img, y, x, ch);
          *p++ = static_cast<uint8_t>(std::clamp(std::floor(acc + 0.5), 0.0, 255.0));
        }
      }
    }
  });
}

TEST(Resize, HandComputedBilinear) {
  Tensor row = Tensor::from_vector<uint8_t>({0, 255}, {1, 2, 1});
  Tensor up = resize(row, 1, 4);
  ASSERT_EQ(up.shape(), (Shape{1, 4, 1}));
  EXPECT_EQ(std::vector<uint8_t>(up.data<uint8_t>(), up.data<uint8_t>() + 4),
            (std::vector<uint8_t>{0, 64, 191, 255}));
  // 4 -> 2 with antialiasing: a triangle of radius 2 source pixels.
  Tensor four = Tensor::from_vector<uint8_t>({0, 100, 200, 50}, {1, 4, 1});
  Tensor down = resize(four, 1, 2);
  EXPECT_EQ(down.data<uint8_t>()[0], 71);  // (0*.75 + 100*.75 + 200*.25) / 1.75
  Tensor plain = resize(four, 1, 2, /*antialias=*/false);
  EXPECT_EQ(plain.data<uint8_t>()[0], 50);   // halfway between 0 and 100
  EXPECT_EQ(plain.data<uint8_t>()[1], 125);  // halfway between 200 and 50
}

TEST(Resize, MatchesNaiveReference) {
  struct Case {
    int h, w, c, oh, ow;
    bool aa;
  };
  for (Case k :
       {Case{13, 17, 3, 29, 31, true}, Case{40, 33, 3, 11, 7, true}, Case{40, 33, 1, 11, 7, false},
        Case{9, 30, 3, 20, 10, true}, Case{16, 16, 3, 16, 16, true}, Case{5, 5, 2, 12, 3, true}}) {
    Tensor img = synthetic_image(k.h, k.w, k.c, k.h * 100 + k.w);
    Tensor got = resize(img, k.oh, k.ow, k.aa);
    Tensor want = naive_resize(img, k.oh, k.ow, k.aa);
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < got.num_elements(); ++i)
      ASSERT_NEAR(got.data<uint8_t>()[i], want.data<uint8_t>()[i], 1)
          << k.h << "x" << k.w << " -> " << k.oh << "x" << k.ow << " at " << i;
  }
  Tensor img = synthetic_image(16, 16, 3);
  EXPECT_TRUE(resize(img, 16, 16).equals(img)) << "same size is the identity";
}

// The horizontal filter's SIMD kernels (windowed permutes, gathers) give the same bits
// as the plain loop, for upscaling, downscaling with wide filters, crops and flips.
TEST(Resize, EveryHorizontalKernelGivesTheSameBits) {
  struct Case {
    int h, w, c, oh, ow;
  };
  for (Case k : {Case{37, 53, 3, 64, 200}, Case{64, 180, 3, 30, 160}, Case{20, 256, 1, 20, 224},
                 Case{20, 300, 3, 10, 41}, Case{9, 13, 2, 9, 13}, Case{15, 7, 3, 15, 8},
                 // downscaling by 1.79x (4 taps: only the AVX-512 window fits), 1.92x (4
                 // taps) and 2.23x (5 taps): gathers with more than 3 taps, and the 64-value
                 // AVX-512 window; 2.5x (7 taps) and 3.4x (9 taps) for the latter's wider
                 // windows and taps; 4.5x fits no window
                 Case{16, 400, 3, 16, 224}, Case{16, 430, 3, 16, 224}, Case{12, 500, 3, 12, 224},
                 Case{12, 560, 3, 12, 224}, Case{6, 760, 3, 6, 224}, Case{6, 1000, 1, 6, 222}}) {
    Tensor img = synthetic_image(k.h, k.w, k.c, k.h * 7 + k.w);
    std::vector<Tensor> outs;
    for (auto kernel : {detail::HFilterKernel::kScalar, detail::HFilterKernel::kGather,
                        detail::HFilterKernel::kWindow, detail::HFilterKernel::kNarrowWindow,
                        detail::HFilterKernel::kWindow512, detail::HFilterKernel::kWideWindow512}) {
      detail::force_hfilter_kernel(kernel);
      Tensor resized = resize(img, k.oh, k.ow);
      Tensor flipped = hflip(img);
      Rng rng(k.w);
      AugmentOptions o;
      o.random_resized_crop = RandomResizedCropOptions{};
      o.random_resized_crop->height = k.oh;
      o.random_resized_crop->width = k.ow;
      o.flip_probability = 0.5;
      o.normalize = NormalizeOptions{{0.45f}, {0.226f}};  // a bias that is not 0
      Tensor augmented = augment(img, o, rng);
      outs.push_back(resized);
      outs.push_back(flipped);
      outs.push_back(augmented);
    }
    detail::force_hfilter_kernel(detail::HFilterKernel::kBest);
    for (size_t i = 3; i < outs.size(); ++i)  // each kernel's three against the plain loop's
      EXPECT_TRUE(outs[i].equals(outs[i % 3]))
          << k.h << "x" << k.w << "x" << k.c << " -> " << k.oh << "x" << k.ow << " output " << i;
  }
}

// The vertical filter's streaming (non-temporal) stores, used for float outputs of 256
// KiB and more, give the same bits as cached stores and as the plain loop: ImageNet-sized
// outputs, upscaled (two taps) and downscaled (more).
TEST(Resize, StreamedStoresGiveTheSameBits) {
  for (int side : {256, 520}) {
    Tensor img = synthetic_image(side, side, 3, side);
    AugmentOptions o;
    o.random_resized_crop = RandomResizedCropOptions{};
    o.random_resized_crop->height = 224;
    o.random_resized_crop->width = 224;
    o.flip_probability = 0.5;
    o.normalize = NormalizeOptions{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    for (int seed = 0; seed < 6; ++seed) {
      std::vector<Tensor> outs;
      for (auto mode :
           {detail::StoreMode::kCached, detail::StoreMode::kStreaming, detail::StoreMode::kBest}) {
        detail::force_store_mode(mode);
        Rng rng(seed);
        outs.push_back(augment(img, o, rng));
      }
      detail::force_store_mode(detail::StoreMode::kBest);
      detail::force_hfilter_kernel(detail::HFilterKernel::kScalar);  // no AVX-512 at all
      Rng rng(seed);
      outs.push_back(augment(img, o, rng));
      detail::force_hfilter_kernel(detail::HFilterKernel::kBest);
      ASSERT_EQ(outs[0].shape(), (Shape{3, 224, 224}));
      for (size_t i = 1; i < outs.size(); ++i)
        EXPECT_TRUE(outs[i].equals(outs[0])) << side << " px, seed " << seed << ", output " << i;
    }
  }
}

// The uint8 output's vertical kernels (AVX2, AVX-512: filter, round, clamp and
// interleave in registers) give the plain path's bytes for any row: widths around the
// vector sizes, 1, 2 and 3 channels, 1 to 9 taps, and sums at and around every rounding
// and clamping edge (exact halves, -0, below 0, 255 and above). Each kernel runs where
// the CPU has it; elsewhere the force falls back to the next one down.
TEST(Resize, EveryUint8VerticalKernelGivesTheSameBits) {
  const float edges[] = {-1e9f,      -3.0f,  -0.5f,  -0.0f,  0.0f,       0.49999997f,
                         0.5f,       1.5f,   2.5f,   127.5f, 254.49998f, 254.5f,
                         254.50002f, 255.0f, 255.5f, 256.0f, 1e9f};
  Rng rng(11);
  for (int k : {1, 2, 3, 4, 5, 9})
    for (int c : {1, 2, 3})
      for (int n : {1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 63, 224, 225}) {
        std::vector<std::vector<float>> planes(k, std::vector<float>(static_cast<size_t>(c) * n));
        std::vector<const float*> rows;
        for (auto& r : planes) {
          for (size_t i = 0; i < r.size(); ++i)  // edges where one tap decides, else any sum
            r[i] = k == 1 && i % 2 == 0 ? edges[(i / 2) % std::size(edges)]
                                        : static_cast<float>(rng.uniform01() * 300 - 20);
          rows.push_back(r.data());
        }
        std::vector<float> w(k, 1.0f);
        if (k > 1)
          for (float& v : w) v = static_cast<float>(rng.uniform01()) / k;
        std::vector<float> acc(static_cast<size_t>(c) * n);
        std::vector<std::vector<uint8_t>> outs;
        for (auto kernel : {detail::VFilterKernel::kScalar, detail::VFilterKernel::kAvx2,
                            detail::VFilterKernel::kAvx512, detail::VFilterKernel::kBest}) {
          outs.emplace_back(static_cast<size_t>(c) * n + 1, 0xAB);  // one guard byte past the row
          detail::vfilter_u8_row(kernel, rows.data(), w.data(), k, n, c, acc.data(),
                                 outs.back().data());
        }
        for (size_t i = 1; i < outs.size(); ++i)
          ASSERT_EQ(outs[i], outs[0])
              << k << " taps, " << c << " channels, " << n << " pixels, kernel " << i;
        if (k != 1) continue;
        for (size_t i = 0; i < acc.size(); ++i)    // the plain path's rounding itself
          ASSERT_EQ(outs[0][(i % n) * c + i / n],  // + 0.5 in float: 0.49999997 gives 1
                    std::clamp(std::floor(rows[0][i] + 0.5f), 0.0f, 255.0f))
              << rows[0][i];
      }
}

// The same through resample: resizes up and down to odd sizes, 1x1 images, crops at the
// edges, flips and random resized crops, uint8 and float, 1 and 3 channels, with every
// vertical kernel the CPU has, against the plain one.
TEST(Resize, EveryVerticalKernelGivesTheSameBitsThroughResample) {
  struct Case {
    int h, w, c, oh, ow;
  };
  for (Case k :
       {Case{1, 1, 3, 1, 1}, Case{1, 1, 1, 5, 37}, Case{3, 2, 3, 17, 33}, Case{40, 97, 3, 13, 31},
        Case{40, 97, 1, 13, 31}, Case{375, 500, 3, 224, 224}, Case{60, 61, 3, 225, 17},
        Case{9, 300, 1, 30, 15}, Case{33, 47, 3, 33, 47}, Case{2, 2, 3, 1, 1}}) {
    Tensor img = synthetic_image(k.h, k.w, k.c, k.h * 5 + k.w);
    Tensor checker = Tensor::make(DType::kUInt8, {k.h, k.w, k.c}, [&](std::byte* b) {
      for (int64_t i = 0; i < static_cast<int64_t>(k.h) * k.w * k.c; ++i)
        b[i] = std::byte{static_cast<uint8_t>(((i / k.c) % k.w + (i / k.c) / k.w) % 2 * 255)};
    });
    const Rect edge{k.h - std::min(k.h, 5), k.w - std::min(k.w, 19), std::min(k.h, 5),
                    std::min(k.w, 19)};
    std::vector<Tensor> outs;
    for (auto kernel : {detail::VFilterKernel::kScalar, detail::VFilterKernel::kAvx2,
                        detail::VFilterKernel::kAvx512}) {
      detail::force_vfilter_kernel(kernel);
      for (const Tensor* src : {&img, &checker}) {
        outs.push_back(resize(*src, k.oh, k.ow));
        outs.push_back(resize(*src, k.oh, k.ow, /*antialias=*/false));
        outs.push_back(crop(*src, edge));
        outs.push_back(hflip(*src));
        for (int seed = 0; seed < 4; ++seed) {
          Rng rng(seed);
          AugmentOptions o;
          o.random_resized_crop = RandomResizedCropOptions{};
          o.random_resized_crop->height = k.oh;
          o.random_resized_crop->width = k.ow;
          o.flip_probability = 0.5;
          if (seed == 3) o.normalize = NormalizeOptions{{0.45f}, {0.226f}};
          outs.push_back(augment(*src, o, rng));
        }
      }
    }
    detail::force_vfilter_kernel(detail::VFilterKernel::kBest);
    const size_t per = outs.size() / 3;
    for (size_t i = per; i < outs.size(); ++i)
      EXPECT_TRUE(outs[i].equals(outs[i % per]))
          << k.h << "x" << k.w << "x" << k.c << " -> " << k.oh << "x" << k.ow << " output " << i;
  }
}

// ---- pad_crop, flip, crop ----

TEST(PadCrop, ShapeAndZeroBorders) {
  Tensor img = coordinate_image(6, 7, 2);
  for (int dy = 0; dy <= 4; ++dy)
    for (int dx = 0; dx <= 4; ++dx) {
      Tensor out = pad_crop(img, 2, dy, dx);
      ASSERT_EQ(out.shape(), img.shape());
      for (int y = 0; y < 6; ++y)
        for (int x = 0; x < 7; ++x)
          for (int c = 0; c < 2; ++c) {
            int sy = y + dy - 2, sx = x + dx - 2;
            bool inside = sy >= 0 && sy < 6 && sx >= 0 && sx < 7;
            ASSERT_EQ(at(out, y, x, c), inside ? at(img, sy, sx, c) : 0)
                << "dy " << dy << " dx " << dx << " at " << y << "," << x;
          }
    }
  // Offset (0, 0): the first `pad` rows and columns are zero.
  Tensor corner = pad_crop(
      Tensor::make(DType::kUInt8, {5, 5, 1}, [](std::byte* b) { std::memset(b, 9, 25); }), 2, 0, 0);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(at(corner, 0, i, 0), 0);
    EXPECT_EQ(at(corner, 1, i, 0), 0);
    EXPECT_EQ(at(corner, i, 1, 0), 0);
  }
  EXPECT_EQ(at(corner, 2, 2, 0), 9);
  EXPECT_EQ(at(corner, 4, 4, 0), 9);
  EXPECT_NE(error_of([&] { pad_crop(img, 2, 5, 0); }).find("pad_crop"), std::string::npos);
}

TEST(Flip, MirrorsColumns) {
  Tensor img = coordinate_image(5, 8, 3);
  Tensor f = hflip(img);
  ASSERT_EQ(f.shape(), img.shape());
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(at(f, y, x, c), at(img, y, 7 - x, c));
  EXPECT_TRUE(hflip(f).equals(img));
}

TEST(Crop, TakesTheRect) {
  Tensor img = coordinate_image(10, 12, 3);
  Tensor c = crop(img, {2, 3, 4, 5});
  ASSERT_EQ(c.shape(), (Shape{4, 5, 3}));
  EXPECT_EQ(at(c, 0, 0, 0), at(img, 2, 3, 0));
  EXPECT_EQ(at(c, 3, 4, 2), at(img, 5, 7, 2));
  EXPECT_FALSE(error_of([&] { crop(img, {8, 0, 4, 1}); }).empty());
}

// ---- normalize ----

TEST(Normalize, ValuesAndChwLayout) {
  Tensor img = coordinate_image(3, 4, 3);
  NormalizeOptions n;
  n.mean = {0.485f, 0.456f, 0.406f};
  n.std = {0.229f, 0.224f, 0.225f};
  Tensor out = normalize(img, n);
  ASSERT_EQ(out.dtype(), DType::kFloat32);
  ASSERT_EQ(out.shape(), (Shape{3, 3, 4}));
  const float* p = out.data<float>();
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x) {
        float want = (at(img, y, x, c) / 255.0f - n.mean[c]) / n.std[c];
        ASSERT_NEAR(p[(c * 3 + y) * 4 + x], want, 1e-5);
      }
  Tensor unit = normalize(img);
  EXPECT_NEAR(unit.data<float>()[(2 * 3 + 1) * 4 + 3], at(img, 1, 3, 2) / 255.0f, 1e-6);
  NormalizeOptions wrong;
  wrong.mean = {0.5f, 0.5f};
  EXPECT_NE(error_of([&] { normalize(img, wrong); }).find("mean has 2 values"), std::string::npos);
}

// ---- random resized crop ----

TEST(RandomResizedCrop, RectStaysInsideAndWithinScaleAndRatio) {
  RandomResizedCropOptions o;
  int fallbacks = 0;
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    Rng rng(seed);
    const int H = 180 + static_cast<int>(seed % 100), W = 256;
    Rect r = random_resized_crop_rect(H, W, o, rng);
    ASSERT_GE(r.y, 0);
    ASSERT_GE(r.x, 0);
    ASSERT_LE(r.y + r.height, H);
    ASSERT_LE(r.x + r.width, W);
    const double area = static_cast<double>(r.height) * r.width / (static_cast<double>(H) * W);
    const double ratio = static_cast<double>(r.width) / r.height;
    if (r.height == H && r.width == W) {
      ++fallbacks;
      continue;
    }
    // Rounding the sides to whole pixels moves area and ratio a little.
    ASSERT_GE(area, 0.08 * 0.97) << "seed " << seed;
    ASSERT_LE(area, 1.0);
    ASSERT_GE(ratio, 0.75 * 0.97);
    ASSERT_LE(ratio, 4.0 / 3.0 * 1.03);
  }
  EXPECT_LT(fallbacks, 300);
}

TEST(RandomResizedCrop, FallbackIsTheCentralCropInTheRatioRange) {
  RandomResizedCropOptions o;
  o.scale_min = 0.99;
  o.ratio_min = o.ratio_max = 1.0;
  Rng rng(3);
  // A 10x1000 strip: no square of 99% of its area fits; the fallback is the centred 10x10.
  Rect r = random_resized_crop_rect(10, 1000, o, rng);
  EXPECT_EQ(r, (Rect{0, 495, 10, 10}));
}

TEST(RandomResizedCrop, ScaleBoundsHold) {
  RandomResizedCropOptions o;
  o.scale_min = 0.5;
  o.scale_max = 0.6;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    Rng rng(seed);
    Rect r = random_resized_crop_rect(200, 200, o, rng);
    double area = r.height * r.width / 40000.0;
    ASSERT_GE(area, 0.5 * 0.98);
    ASSERT_LE(area, 0.6 * 1.02);
  }
}

// ---- the fused augmentation ----

AugmentOptions imagenet_options(int size = 224) {
  AugmentOptions o;
  o.random_resized_crop = RandomResizedCropOptions{};
  o.random_resized_crop->height = o.random_resized_crop->width = size;
  o.flip_probability = 0.5;
  o.normalize = NormalizeOptions{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  return o;
}

TEST(Augment, FusedEqualsTheStepsOneByOne) {
  Tensor img = synthetic_image(120, 150, 3, 8);
  AugmentOptions o = imagenet_options(64);
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Rng a(seed), b(seed);
    Tensor fused = augment(img, o, a);
    ASSERT_EQ(fused.shape(), (Shape{3, 64, 64}));
    // The same draws, applied step by step.
    Rect r = random_resized_crop_rect(120, 150, *o.random_resized_crop, b);
    bool flip = b.bernoulli(0.5);
    Tensor step = resize(crop(img, r), 64, 64);
    if (flip) step = hflip(step);
    Tensor want = normalize(step, *o.normalize);
    for (int64_t i = 0; i < want.num_elements(); ++i)
      ASSERT_NEAR(fused.data<float>()[i], want.data<float>()[i], 1.01f / 255 / 0.224f)
          << "seed " << seed;
  }
}

TEST(Augment, DecodeAugmentEqualsAugmentOfDecode) {
  for (int channels : {3, 1}) {
    std::string jpg = encode_jpeg(synthetic_image(150, 200, channels, 4), 90);
    Tensor decoded = decode_image(jpg);
    std::vector<AugmentOptions> cases = {imagenet_options(96)};
    AugmentOptions resize_crop;
    resize_crop.resize_shorter = 80;
    resize_crop.center_crop_height = resize_crop.center_crop_width = 64;
    resize_crop.normalize = NormalizeOptions{};
    cases.push_back(resize_crop);
    AugmentOptions uint8_out = imagenet_options(50);
    uint8_out.normalize.reset();
    cases.push_back(uint8_out);
    if (channels == 1) cases[0].normalize = NormalizeOptions{{0.5f}, {0.25f}};
    for (const AugmentOptions& o : cases)
      for (uint64_t seed = 0; seed < 25; ++seed) {
        Rng a(seed), b(seed);
        Tensor fused = decode_augment(jpg, {}, o, a);
        Tensor ref = augment(decoded, o, b);
        ASSERT_TRUE(fused.equals(ref)) << "seed " << seed << " channels " << channels;
      }
  }
}

// decoder_scale: a crop at least twice the output is decoded scaled down in the IDCT.
// The output is then close to the exact path's, not equal; a smaller crop is decoded
// exactly as without the option; the random draws, and so determinism, are unchanged.
TEST(Augment, DecoderScaleIsCloseToTheExactPathAndOnlyForLargeCrops) {
  for (int channels : {3, 1}) {
    const std::string jpg = encode_jpeg(synthetic_image(480, 640, channels, 5), 90);
    for (int size : {64, 300}) {
      AugmentOptions exact = imagenet_options(size);
      exact.normalize.reset();  // uint8 out, for PSNR
      AugmentOptions scaled = exact;
      scaled.decoder_scale = true;
      int differ = 0;
      for (uint64_t seed = 0; seed < 30; ++seed) {
        Rng a(seed), b(seed), c(seed);
        Tensor e = decode_augment(jpg, {}, exact, a);
        Tensor s = decode_augment(jpg, {}, scaled, b);
        ASSERT_EQ(s.shape(), e.shape());
        ASSERT_TRUE(decode_augment(jpg, {}, scaled, c).equals(s)) << "seed " << seed;
        if (s.equals(e)) continue;
        ++differ;
        EXPECT_GT(psnr(s, e), 30.0)
            << "seed " << seed << " size " << size << " channels " << channels;
      }
      // 480 rows cannot hold a crop of twice 300: never scaled. At 64 nearly every crop
      // (at least 8% of the image, about 157 pixels a side) is at least 128 a side.
      if (size == 300)
        EXPECT_EQ(differ, 0) << "channels " << channels;
      else
        EXPECT_GE(differ, 25) << "channels " << channels;
    }
  }
}

TEST(Augment, DecoderScaleTakesPowersOfTwo) {
  const std::string jpg = encode_jpeg(synthetic_image(37, 50, 3, 6), 90);
  JpegRegionDecoder dec;
  dec.read_header(jpg);
  EXPECT_EQ(dec.scale_down(4), std::make_pair(10, 13));  // rounded up, as libjpeg does
  std::vector<uint8_t> scratch;
  DecodedRegion r = dec.decode(0, 0, 10, 13, scratch);
  EXPECT_EQ(r.height, 10);
  EXPECT_EQ(r.width, 13);
  auto code_of = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return static_cast<int>(e.code());
    }
    return -1;
  };
  const int invalid = static_cast<int>(ErrorCode::kInvalidArgument);
  dec.read_header(jpg);
  EXPECT_EQ(code_of([&] { dec.scale_down(3); }), invalid);
  dec.read_header(jpg);
  dec.scale_down(2);  // 25x19: a region of the full image's size is outside it
  EXPECT_EQ(code_of([&] { dec.decode(0, 0, 20, 25, scratch); }), invalid);
}

TEST(Augment, PadCropAndFlipOnSmallImages) {
  Tensor img = coordinate_image(28, 28, 1);
  AugmentOptions o;
  o.pad_crop = 4;
  o.flip_probability = 0.5;
  std::set<std::string> distinct;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Rng rng(seed);
    Tensor out = augment(img, o, rng);
    ASSERT_EQ(out.shape(), (Shape{28, 28, 1}));
    distinct.insert(std::string(out.bytes()));
  }
  EXPECT_GT(distinct.size(), 30u);
  // No options: the input itself, not a copy.
  Rng rng(1);
  EXPECT_TRUE(augment(img, AugmentOptions{}, rng).shares_buffer_with(img));
}

TEST(Augment, ValidateRefusesNonsense) {
  AugmentOptions o;
  o.pad_crop = -1;
  EXPECT_NE(error_of([&] { validate(o); }).find("pad_crop"), std::string::npos);
  o = imagenet_options();
  o.resize_shorter = 10;
  EXPECT_NE(error_of([&] { validate(o); }).find("exclusive"), std::string::npos);
  o = AugmentOptions{};
  o.resize_shorter = 10;
  o.center_crop_height = o.center_crop_width = 20;
  Rng rng(0);
  EXPECT_NE(error_of([&] { augment(synthetic_image(10, 10, 3), o, rng); }).find("larger"),
            std::string::npos);
  EXPECT_NE(error_of([&] { augment(Tensor::from_vector<float>({1}), o, rng); }).find("uint8"),
            std::string::npos);
}

// ---- the map functions, through the registry and through a spec ----

MapFn map_fn(const std::string& name, const std::string& args) {
  nlohmann::json j = nlohmann::json::parse(args);
  SpecObject a(j, "$.stages[0].args");
  MapFn fn = registry().map_fns.at(name)(a);
  a.finish();
  return fn;
}

Example element(int64_t id, int32_t echo, Tensor image) {
  Example e(id);
  e.set_echo(echo);
  e.set("image", std::move(image));
  return e;
}

TEST(ImageFunctions, ReproduciblePerCopyAndDifferentAcrossEchoes) {
  std::string jpg = encode_jpeg(synthetic_image(96, 128, 3, 2), 90);
  MapFn fused =
      map_fn("decode_augment", R"({"random_resized_crop": 64, "flip": true, "normalize": true})");
  MapFn decode = map_fn("decode_image", "{}");
  MapFn aug = map_fn("augment", R"({"random_resized_crop": 64, "flip": true, "normalize": true})");
  MapContext ctx;
  ctx.seed = 77;
  for (int64_t id : {0, 5, 9}) {
    std::set<std::string> per_echo;
    for (int32_t echo = 0; echo < 4; ++echo) {
      Tensor a = fused(element(id, echo, Tensor::from_bytes(jpg)), ctx).get("image");
      Tensor b = fused(element(id, echo, Tensor::from_bytes(jpg)), ctx).get("image");
      ASSERT_TRUE(a.equals(b)) << "same (seed, id, echo) must give the same copy";
      ASSERT_EQ(a.shape(), (Shape{3, 64, 64}));
      Tensor c = aug(decode(element(id, echo, Tensor::from_bytes(jpg)), ctx), ctx).get("image");
      ASSERT_TRUE(a.equals(c)) << "decode_augment == decode_image + augment";
      per_echo.insert(std::string(a.bytes()));
    }
    EXPECT_EQ(per_echo.size(), 4u) << "each echoed copy gets its own augmentation";
  }
  MapContext other;
  other.seed = 78;
  EXPECT_FALSE(fused(element(0, 0, Tensor::from_bytes(jpg)), ctx)
                   .get("image")
                   .equals(fused(element(0, 0, Tensor::from_bytes(jpg)), other).get("image")));
}

TEST(ImageFunctions, AMissingFieldBesideATfExampleKeySaysHowToNameIt) {
  MapContext ctx;
  Example e(3);
  e.set("image/encoded", Tensor::from_bytes("x"));
  e.set("y", Tensor::scalar<int64_t>(1));
  std::string msg = error_of([&] { map_fn("decode_image", "{}")(e, ctx); });
  EXPECT_NE(msg.find("no field 'image' (fields: image/encoded, y)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"image\": \"image/encoded\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"field\": \"image/encoded\""), std::string::npos) << msg;
  // Without such a key, the plain error listing the fields.
  Example other(4);
  other.set("y", Tensor::scalar<int64_t>(1));
  msg = error_of([&] { map_fn("decode_image", "{}")(other, ctx); });
  EXPECT_NE(msg.find("no field 'image' (fields: y)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("tfrecord"), std::string::npos) << msg;
}

TEST(ImageFunctions, DecodePassesDecodedImagesThrough) {
  MapFn decode = map_fn("decode_image", R"({"channels": 1})");
  Tensor raw = coordinate_image(28, 28, 1);
  EXPECT_TRUE(decode(element(1, 0, raw), {}).get("image").shares_buffer_with(raw));
  Tensor flat = raw.reshaped({28, 28});
  EXPECT_EQ(decode(element(1, 0, flat), {}).get("image").shape(), (Shape{28, 28, 1}));
  Tensor png = Tensor::from_bytes(encode_png(synthetic_image(10, 12, 3)));
  EXPECT_EQ(decode(element(1, 0, png), {}).get("image").shape(), (Shape{10, 12, 1}));
  std::string msg = error_of([&] {
    decode(element(17, 0, Tensor::from_bytes(std::string("\x00\x01\x02\x03 junk", 9))), {});
  });
  EXPECT_NE(msg.find("not a JPEG or PNG (first bytes 00 01 02 03"), std::string::npos) << msg;
  EXPECT_NE(msg.find("field 'image'"), std::string::npos) << msg;
}

TEST(ImageFunctions, ResizeNormalizeAndOutputField) {
  Tensor img = synthetic_image(20, 40, 3);
  Example e = map_fn("resize", R"({"size": 10})")(element(0, 0, img), {});
  EXPECT_EQ(e.get("image").shape(), (Shape{10, 20, 3}));
  e = map_fn("resize", R"({"size": [7, 9]})")(element(0, 0, img), {});
  EXPECT_EQ(e.get("image").shape(), (Shape{7, 9, 3}));
  e = map_fn("normalize", R"({"mean": 0.5, "std": 0.5, "output": "x"})")(element(0, 0, img), {});
  EXPECT_EQ(e.get("x").shape(), (Shape{3, 20, 40}));
  EXPECT_EQ(e.get("image").dtype(), DType::kUInt8);
  EXPECT_NEAR(e.get("x").data<float>()[0], (at(img, 0, 0, 0) / 255.0f - 0.5f) / 0.5f, 1e-5);
}

TEST(ImageFunctions, BadArgsNameThePath) {
  auto spec_error = [](const std::string& fn, const std::string& args) {
    return error_of([&] { map_fn(fn, args); });
  };
  EXPECT_NE(spec_error("augment", R"({"pad_crop": -1})").find("$.stages[0].args.pad_crop"),
            std::string::npos);
  EXPECT_NE(spec_error("augment", R"({"pad_crops": 2})").find("pad_crops"), std::string::npos);
  EXPECT_NE(spec_error("augment", R"({"random_resized_crop": {"size": 224, "scale": [0.5, 0.1]}})")
                .find("random_resized_crop.scale"),
            std::string::npos);
  EXPECT_NE(spec_error("augment", R"({"random_resized_crop": {"sise": 224}})").find("size"),
            std::string::npos);
  EXPECT_NE(
      spec_error("augment", R"({"random_resized_crop": 224, "resize": 256})").find("exclusive"),
      std::string::npos);
  EXPECT_NE(spec_error("augment", R"({"normalize": {"mean": [0.5, 0.5], "std": [1, 1, 1]}})")
                .find("normalize.std"),
            std::string::npos);
  EXPECT_NE(spec_error("augment", R"({"normalize": {"std": [0]}})").find("positive"),
            std::string::npos);
  EXPECT_NE(spec_error("augment", R"({"flip": 2})").find("flip"), std::string::npos);
  EXPECT_NE(spec_error("decode_image", R"({"channels": 2})").find("channels"), std::string::npos);
  // decoder_scale is decode_augment's: augment receives pixels.
  EXPECT_NE(spec_error("augment", R"({"decoder_scale": true})").find("decoder_scale"),
            std::string::npos);
  EXPECT_NO_THROW(map_fn("decode_augment", R"({"random_resized_crop": 8, "decoder_scale": true})"));
  EXPECT_NE(spec_error("resize", "{}").find("size"), std::string::npos);
}

TEST(ImageFunctions, InAPipelineSpec) {
  // The range source carries no image; a spec refusing bad args before running is what
  // is checked here, and that every image function is registered.
  std::string msg = error_of([] {
    testing::build(R"({"seed": 1, "source": {"kind": "range", "count": 3},
      "stages": [{"op": "map", "fn": "augment", "args": {"pad_crop": -2}}]})");
  });
  EXPECT_NE(msg.find("pad_crop"), std::string::npos) << msg;
  for (const char* name : {"decode_image", "augment", "decode_augment", "resize", "normalize"})
    EXPECT_TRUE(registry().map_fns.count(name)) << name;
}

}  // namespace
}  // namespace dataecho
